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

// A plan that does not fit its nodes' memory: not a failure a retry can
// mend, so a supervisor stops recovering on it.
class PlanRefused : public Error {
public:
    explicit PlanRefused(const std::string& message) : Error(message) {}
};

// A node serving another session: worth asking again shortly (its previous
// session may be winding down).
class NodeBusy : public Error {
public:
    explicit NodeBusy(const std::string& message) : Error(message) {}
};

// Builds an Error from a fmt format string, so call sites stay one line.
template <typename... Args>
[[nodiscard]] Error make_error(fmt::format_string<Args...> format, Args&&... args) {
    return Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera
