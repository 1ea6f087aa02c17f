// End-to-end tests of the tessera binary: real processes, real files.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace tessera {

namespace {

using test::run_process;

const std::vector<int32_t> kReferenceIds = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410,
    408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

// The README's first command: the bundled model, found without -m.
// `tessera devices --json`: the CPU's target, and the Vulkan devices (an
// array when the binary has the backend, where CI's lavapipe is one; null
// without it).
TEST(Cli, DevicesListsTheCpuAndTheVulkanDevices) {
    const auto r = test::run_process(test::tessera_cmd({"devices", "--json"}), 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["cpu"]["target"].get<std::string>().empty());
    ASSERT_TRUE(j.contains("vulkan"));
    if (!j["vulkan"].is_null()) {
        ASSERT_FALSE(j["vulkan"].empty()) << "a Vulkan build on a machine without a device (install mesa-vulkan-drivers)";
        EXPECT_FALSE(j["vulkan"][0]["name"].get<std::string>().empty());
    }
}

TEST(Cli, RunsTheBundledModelByDefault) {
    const auto r =
        run_process(test::tessera_cmd({"run", "-p", "Once upon a time", "-n", "60", "--temp", "0", "--json"}), 30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    std::vector<int32_t> ids = j["prompt_ids"].get<std::vector<int32_t>>();
    const auto gen = j["tokens"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), gen.begin(), gen.end());
    EXPECT_EQ(ids, kReferenceIds);
    EXPECT_EQ(j["prompt_tokens"], 5);
    EXPECT_EQ(j["text"].get<std::string>().substr(0, 30), ", there was a little girl name");
    EXPECT_GT(j["timings"]["generation_tokens_per_second"].get<double>(), 0.0);
}

TEST(Cli, StreamsTextAndPrintsSpeed) {
    const auto r =
        run_process(test::tessera_cmd({"run", "-p", "Once upon a time", "-n", "20", "--temp", "0", "-t", "2"}), 30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST(Cli, SameSeedSameSampledText) {
    const auto a = run_process(test::tessera_cmd({"run", "-n", "40", "--seed", "7", "--temp", "1.0", "--json"}), 30);
    const auto b = run_process(test::tessera_cmd({"run", "-n", "40", "--seed", "7", "--temp", "1.0", "--json"}), 30);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
}

TEST(Cli, PromptLongerThanContextIsAClearError) {
    const auto r =
        run_process(test::tessera_cmd({"run", "-p", "Once upon a time there was a long prompt", "-c", "6"}), 10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: the prompt is"), std::string::npos) << r.err;
}

TEST(Cli, HelpDocumentsEveryRunFlag) {
    const auto r = run_process(test::tessera_cmd({"run", "--help"}), 10);
    EXPECT_EQ(r.exit_code, 0);
    for (const char* flag : {"--model", "--prompt", "--n-predict", "--ctx-size", "--threads", "--temp", "--top-k",
                             "--top-p", "--min-p", "--repeat-penalty", "--seed", "--json"}) {
        EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
    }
}

TEST(Cli, TokenizePrintsIds) {
    auto r = run_process(test::tessera_cmd({"tokenize", "-m", test::stories260k(), "-p", "Once upon a time"}), 10);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "1 403 407 261 378\n");
    r = run_process(test::tessera_cmd({"tokenize", "-m", test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf", "-p",
                                       "Hello world", "--no-bos"}),
                    10);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "15043 3186\n");
}

TEST(Cli, ConvertThenRunGivesTheReference) {
    const std::string out = test::scratch_dir("cli_convert") + "/s.gguf";
    auto r = run_process(test::tessera_cmd({"convert", test::data_dir() + "/models/stories260K.bin",
                                            test::data_dir() + "/models/tok512.bin", "-o", out}),
                         30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Its progress (quarter lines off a terminal) reaches every tensor.
    EXPECT_NE(r.err.find("writing " + out + ": 100% (47/47 tensors"), std::string::npos) << r.err;
    r = run_process(test::tessera_cmd({"run", "-m", out, "-n", "64", "--temp", "0", "--json"}), 30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    std::vector<int32_t> ids = j["prompt_ids"].get<std::vector<int32_t>>();
    const auto gen = j["tokens"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), gen.begin(), gen.end());
    EXPECT_EQ(ids, kReferenceIds);
}

// Fuzzing found that convert wrote files with 1- or 2-token vocabularies
// (BOS and EOS ids 1 and 2 written regardless) that run then refused, and
// that a legacy header's vocab size of INT32_MIN was undefined behaviour.
TEST(Cli, ConvertRefusesVocabulariesTooSmallForItsSpecialTokens) {
    const std::string dir = test::scratch_dir("cli_convert_vocab");
    std::ifstream in(test::data_dir() + "/models/stories260K.bin", std::ios::binary);
    std::vector<char> header(28);
    in.read(header.data(), 28);
    for (const int32_t vocab : {2, 1, -2, INT32_MIN}) {
        std::memcpy(header.data() + 20, &vocab, 4);
        std::ofstream(dir + "/tiny.bin", std::ios::binary).write(header.data(), 28);
        const auto r =
            run_process(test::tessera_cmd({"convert", dir + "/tiny.bin", test::data_dir() + "/models/tok512.bin", "-o",
                                           dir + "/tiny.gguf"}),
                        30);
        EXPECT_EQ(r.exit_code, 1) << vocab;
        EXPECT_NE(r.err.find(vocab == INT32_MIN ? "not a llama2.c checkpoint" : "cannot hold llama2.c's unknown, BOS and EOS"),
                  std::string::npos)
            << r.err;
        EXPECT_FALSE(std::filesystem::exists(dir + "/tiny.gguf"));
    }
}

TEST(Cli, GenModelIsDeterministic) {
    const std::string dir = test::scratch_dir("cli_gen_model");
    for (const char* name : {"a.gguf", "b.gguf"}) {
        const auto r = run_process(
            test::tessera_cmd({"gen-model", "--dim", "128", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn",
                               "256", "--type", "Q4_0", "--seed", "3", "-q", "-o", dir + "/" + name}),
            30);
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_EQ(read_bytes(dir + "/a.gguf"), read_bytes(dir + "/b.gguf"));
    const auto r = run_process(
        test::tessera_cmd({"run", "-m", dir + "/a.gguf", "-p", "hi", "-n", "8", "--temp", "0", "--json"}), 30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"].size(), 8u);
}

// Corrupt files through the real binary: exit code 1, one "error:" line that
// names the file, within a second.
TEST(Cli, CorruptModelsFailCleanlyAndFast) {
    const std::vector<uint8_t> bytes = read_bytes(test::stories260k());
    const std::string path = test::scratch_dir("cli_corrupt") + "/c.gguf";
    auto check = [&](const std::vector<uint8_t>& content, size_t n, const std::string& label) {
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(n));
        const auto r = run_process(test::tessera_cmd({"run", "-m", path, "-n", "2"}), 5);
        EXPECT_FALSE(r.timed_out) << label;
        EXPECT_EQ(r.exit_code, 1) << label << ": " << r.err;
        EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << label << ": " << r.err;
        EXPECT_NE(r.err.find(path), std::string::npos) << label << ": " << r.err;
        EXPECT_LT(r.seconds, 1.0) << label;
    };
    for (size_t n : {0, 3, 8, 23, 100, 5000, 20000, 400000}) check(bytes, n, "truncated at " + std::to_string(n));
    for (size_t at : {0, 5, 9, 17}) {
        std::vector<uint8_t> flipped = bytes;
        flipped[at] ^= 0xff;
        check(flipped, flipped.size(), "flipped at " + std::to_string(at));
    }
    const auto r = run_process(test::tessera_cmd({"run", "-m", "/nonexistent/model.gguf"}), 5);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("/nonexistent/model.gguf: cannot open"), std::string::npos) << r.err;
}

}  // namespace tessera
