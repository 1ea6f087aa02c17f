#include "test_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <map>

namespace tessera::test {

std::string data_dir() { return std::string(TESSERA_SOURCE_DIR) + "/tests/data"; }

std::string stories260k() { return std::string(TESSERA_SOURCE_DIR) + "/models/stories260K.gguf"; }

// One directory per test: CTest runs tests of one binary as parallel
// processes, and a directory shared by name would be wiped under another
// test's feet.
std::string scratch_dir(const std::string& name) {
    std::filesystem::path dir = std::filesystem::path(TESSERA_TEST_TMP) / name;
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
        dir /= std::string(info->test_suite_name()) + "." + info->name();
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

std::string tessera_binary() { return TESSERA_BINARY; }

std::string relay_binary() {
    return (std::filesystem::path(tessera_binary()).parent_path() / "tessera-relay").string();
}

std::string source_dir() { return TESSERA_SOURCE_DIR; }

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace tessera::test
