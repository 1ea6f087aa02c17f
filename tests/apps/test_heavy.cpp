// Heavy*: slow tests (minutes under the sanitizers, so scripts/test --sanitize
// leaves them out). A TinyLlama-1.1B-shaped Q4_0 model, generated here,
// loads and generates through the real binary.
#include "subprocess.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

namespace tessera {

TEST(Heavy, TinyLlamaShapeQ4_0LoadsAndGenerates) {
    const std::string dir = test::scratch_dir("heavy_tinyllama");
    const std::string model = dir + "/tinyllama-shape-q4_0.gguf";
    const std::string bin = test::tessera_binary();
    auto r = test::run_process({bin, "gen-model", "--dim", "2048", "--layers", "22", "--heads", "32", "--kv-heads", "4",
                                "--ffn", "5632", "--vocab-from",
                                test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf", "--type", "Q4_0",
                                "-q", "-o", model},
                               300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // 1.1B parameters in Q4_0 (18 bytes per 32 weights): about 0.6 GB.
    const auto size = std::filesystem::file_size(model);
    EXPECT_GT(size, 550u << 20);
    EXPECT_LT(size, 700u << 20);
    r = test::run_process({bin, "run", "-m", model, "-p", "Once upon a time", "-n", "6", "--temp", "0", "-c", "64",
                           "-t", "2", "--json"},
                          300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_ids"], nlohmann::json({1, 9038, 2501, 263, 931}));
    const auto tokens = j["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokens.size(), 6u);
    EXPECT_GE(std::set<int32_t>(tokens.begin(), tokens.end()).size(), 2u);
    std::filesystem::remove_all(dir);
}

}  // namespace tessera
