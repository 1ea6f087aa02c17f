// Monotonic wall-clock time for the speed figures that run and bench print,
// and calendar time for status views.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

inline double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Monotonic milliseconds, for the network's deadlines.
inline int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Calendar time (seconds since the Unix epoch), for what other machines
// compare: when a session began, when its root was last heard.
inline double unix_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera
