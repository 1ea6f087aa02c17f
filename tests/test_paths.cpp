#include "test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <map>
#include <vector>

namespace tessera::test {

namespace {

// The folders made for the test now running. A test that passes has its
// folders removed when it ends: the model files the CLI tests write add up
// to gigabytes over a whole run, more than a CI disk holds. A failed test
// keeps its folders, so what it wrote can be read afterwards.
std::vector<std::filesystem::path>& folders_of_this_test() {
    static std::vector<std::filesystem::path> folders;
    return folders;
}

class RemoveFoldersOfPassedTests : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (!info.result()->Failed() && std::getenv("TESSERA_KEEP_TEST_FILES") == nullptr) {
            for (const auto& dir : folders_of_this_test()) {
                std::error_code ignored;
                std::filesystem::remove_all(dir, ignored);
            }
        }
        folders_of_this_test().clear();
    }
};

// Registered before main runs: every test binary links this file.
[[maybe_unused]] const bool listener_registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveFoldersOfPassedTests);
    return true;
}();

}  // namespace

namespace {
// The build's paths, unless the environment moves them: test binaries run
// from another copy of the tree (scripts/gpu_device_check.sh on a lent GPU
// machine) set TESSERA_SOURCE_DIR and TESSERA_TEST_TMP.
std::string from_env_or(const char* name, const char* built) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : built;
}
// Where every test's folders live (scratch, test and lasting ones).
std::filesystem::path test_tmp_root() { return from_env_or("TESSERA_TEST_TMP", TESSERA_TEST_TMP); }
}  // namespace

std::string source_dir() { return from_env_or("TESSERA_SOURCE_DIR", TESSERA_SOURCE_DIR); }

std::string data_dir() { return source_dir() + "/tests/data"; }

std::string stories260k() { return source_dir() + "/models/stories260K.gguf"; }

// One directory per test: CTest runs tests of one binary as parallel
// processes, and a directory shared by name would be wiped under another
// test's feet.
std::string scratch_dir(const std::string& name) {
    std::filesystem::path dir = test_tmp_root() / name;
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
        dir /= std::string(info->test_suite_name()) + "." + info->name();
        folders_of_this_test().push_back(dir);
    }
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

std::string test_dir(const std::string& name) {
    static std::map<std::string, std::string> made;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string key = name + "/" + (info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "");
    auto it = made.find(key);
    if (it == made.end()) it = made.emplace(key, scratch_dir(name)).first;
    return it->second;
}

std::string lasting_dir(const std::string& name) {
    const std::filesystem::path dir = test_tmp_root() / name;
    std::filesystem::create_directories(dir);
    return dir.string();
}

std::string tessera_binary() { return TESSERA_BINARY; }

std::string relay_binary() {
    return (std::filesystem::path(tessera_binary()).parent_path() / "tessera-relay").string();
}


std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    const std::string text = read_text(path);
    return {text.begin(), text.end()};
}

}  // namespace tessera::test
