// End-to-end tests of `tessera quantize` and `tessera perplexity` (with the
// KL-divergence mode): real processes, llama.cpp-style output, clear refusals.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

namespace tessera {

namespace {

using test::run_process;

std::string stories260k() { return test::stories260k(); }
std::string story_text() { return test::source_dir() + "/tests/data/little_stories.txt"; }

double final_ppl(const std::string& out) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("Final estimate: PPL = ([0-9.]+) \\+/- ([0-9.]+)"))) return -1.0;
    return std::stod(m[1]);
}

double stat(const std::string& out, const std::string& label) {
    const size_t at = out.find(label);
    if (at == std::string::npos) return -1.0;
    return std::stod(out.substr(out.find(':', at) + 1));
}

}  // namespace

TEST(QuantizeCli, ConvertsAndReportsEveryTensor) {
    const std::string dir = test::scratch_dir("cli_quantize");
    const auto r = run_process(test::tessera_cmd({"quantize", stories260k(), dir + "/q8.gguf", "q8_0", "-t", "2"}), 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("[48/48] 100%"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("blk.0.attn_q.weight"), std::string::npos);
    EXPECT_NE(r.err.find("F32 -> Q8_0"), std::string::npos);
    EXPECT_NE(r.err.find("fallback: 172 columns are not a multiple of Q8_0's block of 32, using F16"),
              std::string::npos) << r.err;
    EXPECT_NE(r.err.find("model size = 1.13 MiB, quantized size = 0.36 MiB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("5 fell back"), std::string::npos) << r.err;

    const auto run = run_process(
        test::tessera_cmd({"run", "-m", dir + "/q8.gguf", "-p", "Once upon a time", "-n", "20", "--temp", "0"}), 30);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << run.out;
}

// On a terminal (a pseudo-terminal from script(1)) a bar replaces the
// per-tensor lines; the fallbacks are still listed after it, and -v brings
// the lines back.
TEST(QuantizeCli, ABarOnATerminal) {
    const std::string dir = test::test_dir("quantize_terminal");
    const std::string q = test::tessera_binary() + " quantize " + stories260k() + " " + dir + "/q.gguf Q4_0";
    auto r = run_process({"/usr/bin/script", "-qec", q, "/dev/null"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("quantizing " + dir + "/q.gguf ["), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("100% 48/48 tensors"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("fallback: 172 columns"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("(copied)"), std::string::npos) << r.out;
    r = run_process({"/usr/bin/script", "-qec", q + " -v", "/dev/null"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("quantizing " + dir), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(copied)"), std::string::npos) << r.out;
}

TEST(QuantizeCli, RefusesBadInput) {
    const std::string dir = test::scratch_dir("cli_quantize_bad");
    auto r = run_process(test::tessera_cmd({"quantize", dir + "/missing.gguf", dir + "/o.gguf", "Q8_0"}), 10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("missing.gguf"), std::string::npos) << r.err;
    r = run_process(test::tessera_cmd({"quantize", dir + "/missing.gguf", dir + "/o.gguf", "Q8_1"}), 10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("'Q8_1' is not a quantization type (use one of F32, F16, BF16, Q8_0, Q6_K"), std::string::npos) << r.err;
    r = run_process(test::tessera_cmd({"quantize", stories260k(), dir + "/q8.gguf", "Q8_0"}), 30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_process(test::tessera_cmd({"quantize", dir + "/q8.gguf", dir + "/q4.gguf", "Q4_0"}), 30);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--allow-requantize"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/q4.gguf"));
}

TEST(PerplexityCli, PrintsProgressAndTheFinalEstimate) {
    const auto r = run_process(
        test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", story_text(), "-c", "128", "-t", "2"}), 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("[1]", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(",[2]"), std::string::npos) << r.out;
    const double ppl = final_ppl(r.out);
    EXPECT_TRUE(std::isfinite(ppl));
    // stories260K knows this kind of text well: a PPL of a few per token.
    EXPECT_GT(ppl, 1.5) << r.out;
    EXPECT_LT(ppl, 20.0) << r.out;
    EXPECT_NE(r.err.find("calculating perplexity over 31 chunks, n_ctx=128"), std::string::npos) << r.err;
    // Its results go to a pipe: progress on stderr, by quarters, to the end.
    EXPECT_NE(r.err.find("perplexity: 100% (31/31 chunks"), std::string::npos) << r.err;

    const auto two = run_process(
        test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", story_text(), "-c", "128", "--chunks", "2"}), 60);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out.find("[3]"), std::string::npos) << two.out;
    EXPECT_EQ(two.out.substr(0, r.out.find(",[3]")), r.out.substr(0, r.out.find(",[3]")));
}

TEST(PerplexityCli, KlDivergenceAgainstItselfAndItsQ8_0) {
    const std::string dir = test::scratch_dir("cli_kl");
    const std::string base = dir + "/base.kld";
    auto r = run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", story_text(), "-c", "128",
                                            "--chunks", "8", "--kl-divergence-base", base}),
                         60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double base_ppl = final_ppl(r.out);
    ASSERT_GT(base_ppl, 1.0) << r.out;

    r = run_process(
        test::tessera_cmd({"perplexity", "-m", stories260k(), "--kl-divergence", "--kl-divergence-base", base}), 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Around 0, not exactly: the base file holds 16-bit codes of its log-probabilities.
    EXPECT_NEAR(stat(r.out, "Mean    KLD"), 0.0, 1e-5) << r.out;
    EXPECT_NEAR(stat(r.out, "Same top p:"), 100.0, 1e-9) << r.out;
    EXPECT_NEAR(stat(r.out, "RMS Δp"), 0.0, 0.01) << r.out;  // in %
    EXPECT_NE(r.out.find("95.0%   KLD:"), std::string::npos) << r.out;
    EXPECT_NEAR(stat(r.out, "Mean PPL(base)"), base_ppl, 1e-3) << r.out;

    ASSERT_EQ(run_process(test::tessera_cmd({"quantize", stories260k(), dir + "/q8.gguf", "Q8_0"}), 30).exit_code, 0);
    r = run_process(test::tessera_cmd({"perplexity", "-m", dir + "/q8.gguf", "-f", story_text(), "--kl-divergence",
                                       "--kl-divergence-base", base}),
                    60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double kld = stat(r.out, "Mean    KLD");
    EXPECT_GT(kld, 1e-5) << r.out;
    EXPECT_LT(kld, 5e-3) << r.out;
    EXPECT_GT(stat(r.out, "Same top p:"), 95.0) << r.out;
    EXPECT_GT(stat(r.out, "Mean PPL(Q)  "), 1.0) << r.out;
    EXPECT_NEAR(stat(r.out, "Mean PPL(Q)/PPL(base)"), 1.0, 0.01) << r.out;
}

TEST(PerplexityCli, RefusesAMismatchedBaseFileAndShortTexts) {
    const std::string dir = test::scratch_dir("cli_kl_refuse");
    const std::string base = dir + "/base.kld";
    ASSERT_EQ(run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", story_text(), "-c", "64",
                                             "--chunks", "2", "--kl-divergence-base", base}),
                          60)
                  .exit_code,
              0);
    // Another text than the one the base file was made from.
    {
        std::ifstream in(story_text());
        std::string text((std::istreambuf_iterator<char>(in)), {});
        text[10] = 'X';
        std::ofstream(dir + "/other.txt") << text;
    }
    auto r = run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", dir + "/other.txt",
                                            "--kl-divergence", "--kl-divergence-base", base}),
                         60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("was made from another text or tokenization"), std::string::npos) << r.err;
    // Another chunk length.
    r = run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "-c", "128", "--kl-divergence",
                                       "--kl-divergence-base", base}),
                    60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("holds chunks of 64 tokens, not -c 128"), std::string::npos) << r.err;
    // Another vocabulary: a generated model of 500 synthetic tokens (llama.cpp's
    // format records only the vocabulary's size, not its tokens).
    ASSERT_EQ(run_process(test::tessera_cmd({"gen-model", "--dim", "64", "--heads", "2", "--kv-heads", "1", "--ffn",
                                             "128", "--vocab", "500", "-o", dir + "/random.gguf", "-q"}),
                          30)
                  .exit_code,
              0);
    r = run_process(
        test::tessera_cmd({"perplexity", "-m", dir + "/random.gguf", "--kl-divergence", "--kl-divergence-base", base}),
        60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("another vocabulary (512 tokens) than"), std::string::npos) << r.err;
    // Not a base file (our old TSKLBASE format included).
    r = run_process(test::tessera_cmd(
                        {"perplexity", "-m", stories260k(), "--kl-divergence", "--kl-divergence-base", stories260k()}),
                    10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not a KL-divergence base file"), std::string::npos) << r.err;
    // No base file to compare with; a text shorter than one chunk.
    r = run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "--kl-divergence"}), 10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--kl-divergence-base FILE"), std::string::npos) << r.err;
    std::ofstream(dir + "/short.txt") << "Once upon a time.";
    r = run_process(test::tessera_cmd({"perplexity", "-m", stories260k(), "-f", dir + "/short.txt", "-c", "64"}), 10);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("one chunk needs 64"), std::string::npos) << r.err;
}

}  // namespace tessera
