#include "test_paths.h"

#include <filesystem>

namespace tessera::test {

std::string shared_models() { return TESSERA_SHARED_MODELS; }

bool have_shared_models() { return std::filesystem::exists(shared_models() + "/stories260K.gguf"); }

std::string scratch_dir(const std::string& name) {
    const std::filesystem::path dir = std::filesystem::path(TESSERA_TEST_TMP) / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

std::string tessera_binary() { return TESSERA_BINARY; }

std::string source_dir() { return TESSERA_SOURCE_DIR; }

}  // namespace tessera::test
