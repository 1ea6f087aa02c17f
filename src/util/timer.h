// Monotonic wall-clock time for the speed figures that run and bench print.
#pragma once

#include <chrono>

namespace tessera {

inline double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace tessera
