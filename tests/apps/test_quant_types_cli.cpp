// Every weight type end to end: a generated model quantized by `tessera
// quantize` to llama.cpp's mixes and to the new block types (their kernels
// are the same code on every CPU) writes the same KL-divergence base file on
// a single node, on three tensor-parallel ranks in exact mode and on a
// 2-stage pipeline, byte for byte; computed from the mapped file (--mmap) it
// gives the same distributions; greedy generation is the same with
// sequence-parallel prefill and with speculative decoding on a draft of
// another type.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace tessera {

namespace {

using test::run_process;

class QuantTypesCli : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantTypesCli, SingleNodeTensorParallelAndPipelineGiveTheSameBits) {
    const std::string target = GetParam();
    const std::string dir = test::scratch_dir("quant_types_cli_" + target);
    const std::string f32 = dir + "/f32.gguf";
    // Rows of 256 (the K- and I-quants' super-blocks), 4 layers so that the
    // mixes' per-layer choices differ, grouped-query attention.
    const auto g =
        run_process(test::tessera_cmd({"gen-model", "--dim", "256", "--layers", "4", "--heads", "4", "--kv-heads", "2",
                                       "--ffn", "512", "--vocab-from",
                                       test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf", "-q", "-o", f32}),
                    60);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const std::string model = dir + "/" + target + ".gguf";
    std::vector<std::string> quantize = test::tessera_cmd({"quantize", f32, model, target, "-t", "2"});
    if (target.rfind("IQ2_", 0) == 0 || target.rfind("IQ1_", 0) == 0 || target == "IQ3_XXS") {
        // The targets llama-quantize makes only with an importance matrix:
        // the kept one of a model with these matrix shapes (tests/data/SOURCES.md).
        quantize.push_back("--imatrix");
        quantize.push_back(test::data_dir() + "/quant/imatrix-g4s.gguf");
    }
    const auto q = run_process(quantize, 120);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const auto base = [&](const std::string& name, std::vector<std::string> extra) {
        std::vector<std::string> args =
            test::tessera_cmd({"perplexity", "-m", model, "-f", text, "-c", "128", "-b", "32", "--chunks", "2", "-t",
                               "1", "--kl-divergence-base", dir + "/" + name});
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_process(args, 180);
        EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
        return test::read_text(dir + "/" + name);
    };
    const std::string single = base("single.kld", {});
    ASSERT_GT(single.size(), 10000u);
    // (EXPECT_TRUE: a binary file's bytes make no readable message.)
    // Computed from the mapped file: the same distributions up to rounding,
    // where Q4_K rows would be grouped in private memory (its grouped and row
    // kernels sum in different orders, each within 1e-7 of the reference;
    // this random model's saturated attention makes that a KLD of ~2e-4,
    // while a wrong kernel gives > 1e-2).
    const auto mapped = run_process(
        test::tessera_cmd({"perplexity", "-m", model, "-f", text, "-c", "128", "-b", "32", "--chunks", "2", "-t", "1",
                           "--mmap", "--kl-divergence", "--kl-divergence-base", dir + "/single.kld"}),
        180);
    ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
    const size_t at = mapped.out.find("Mean    KLD:");
    ASSERT_NE(at, std::string::npos) << mapped.out;
    EXPECT_LT(std::stod(mapped.out.substr(at + 12)), 1e-3) << mapped.out;
    EXPECT_TRUE(base("tp3.kld", {"--local", "3", "--exact"}) == single) << target << ": 3 tensor-parallel ranks";
    std::unique_ptr<test::BackgroundProcess> worker;
    EXPECT_TRUE(base("pipeline.kld", {"--stages", "root/" + test::start_worker(worker, model)}) == single)
        << target << ": 2-stage pipeline";

    // Generation: greedy tokens of one process equal sequence-parallel
    // prefill's (2 processes) and speculative decoding's with a Q8_0 draft of
    // the same model (another type; greedy verification keeps the target's tokens).
    const std::string draft = dir + "/draft-Q8_0.gguf";
    ASSERT_EQ(run_process(test::tessera_cmd({"quantize", f32, draft, "Q8_0", "-t", "2"}), 120).exit_code, 0);
    const auto run = [&](const std::vector<std::string>& extra) { return test::greedy_tokens(model, extra); };
    const std::vector<int> want = run({});
    ASSERT_EQ(want.size(), 24u);
    EXPECT_EQ(run({"--local", "2", "--prefill", "sp"}), want) << target << ": sequence-parallel prefill";
    EXPECT_EQ(run({"--draft-model", draft}), want) << target << ": speculative decoding with a Q8_0 draft";
}

// A tensor-parallel plan of a K-quant file moves FFN channels in units of
// ffn_down's 256-element blocks (and KV heads in pairs: wo's 128 columns a head): `plan` says
// so, with the shares it rounded.
TEST(QuantTypesPlanCli, SaysWhereSharesWereRoundedToBlocks) {
    const std::string dir = test::scratch_dir("quant_types_plan");
    const std::string model = dir + "/q4k.gguf";
    const auto g =
        run_process(test::tessera_cmd({"gen-model", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                                       "--ffn", "512", "--type", "Q4_K", "-q", "-o", model}),
                    60);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const auto plan = run_process(test::tessera_cmd({"plan", "-m", model, "--local", "3"}), 30);
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("stage 0: FFN channels move in units of 256 (ffn_down is Q4_K), KV heads in units of 2; "
                            "FFN shares 256, 256, 0 (rounded to whole units)"),
              std::string::npos)
        << plan.out;
}

INSTANTIATE_TEST_SUITE_P(Targets, QuantTypesCli,
                         ::testing::Values("Q4_K_M", "Q5_K_M", "IQ4_XS", "Q3_K_M", "Q2_K", "Q5_0", "Q5_1", "IQ4_NL",
                                           "MXFP4", "BF16", "Q4_1", "IQ3_M", "IQ2_M", "IQ3_XXS", "IQ2_XXS",
                                           "IQ1_S", "IQ1_M", "Q1_0", "NVFP4", "Q2_0", "TQ1_0", "TQ2_0"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace

}  // namespace tessera
