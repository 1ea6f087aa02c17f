// Errors a user can act on. Library code throws tessera::Error with a message
// that names the thing that is wrong (file, offset, node, bytes); apps catch it
// at the top, print one line and exit non-zero. Never abort() in library code.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds an Error from a fmt format string, so call sites stay one line.
template <typename... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> format, Args&&... args) {
    return Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera
