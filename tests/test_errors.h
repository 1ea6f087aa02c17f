// The message of the tessera::Error a callable throws, for tests of clear
// errors: they check that it names what went wrong.
#pragma once

#include "util/error.h"

#include <string>

namespace tessera::test {

// What error_of returns when nothing was thrown.
inline constexpr const char* kNoError = "(no error)";

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return kNoError;
}

}  // namespace tessera::test
