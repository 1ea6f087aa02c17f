// Paths the tests read and write, fixed at configure time.
#pragma once

#include <string>

namespace tessera::test {

// ../shared/models beside the repository; tests that need it skip when absent.
std::string shared_models();
bool have_shared_models();
// A fresh scratch directory for one test (under the build tree).
std::string scratch_dir(const std::string& name);
// The same, made fresh once per test and then kept (scratch_dir empties the
// directory on every call).
std::string test_dir(const std::string& name);
std::string tessera_binary();
std::string relay_binary();  // tessera-relay, beside the tessera binary
std::string source_dir();

}  // namespace tessera::test

// Skips the current test, with a message, when ../shared/models is absent.
#define REQUIRE_SHARED_MODELS()                                                               \
    do {                                                                                      \
        if (!::tessera::test::have_shared_models())                                           \
            GTEST_SKIP() << "shared models not found at " << ::tessera::test::shared_models(); \
    } while (0)
