// Long context end to end. KV cache types (--cache-type-k/-ctk,
// --cache-type-v/-ctv): with the same types, tensor parallel over 3
// processes (--exact) and a 2-stage pipeline give one process's greedy tokens
// and perplexity digits; a quantized cache moves the logits, Q4_0 more than
// Q8_0 (KL divergence against an F16 cache); `plan` counts the smaller cache;
// a type the cache cannot hold, or a head width its blocks do not divide, is
// a clear error. Sparse attention (--attention sparse) on every
// plan: tensor parallel over 3 processes (--exact) and a 2-stage pipeline
// give one process's greedy tokens and perplexity digits with the same
// options; a sparse window that covers the context gives dense's; a short
// one changes the result (sparse is really on); bad values are clear errors.
// A full context stops with a clear message, or (--context-full shift or
// evict) goes on past it, with the same tokens on every plan.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessera {

namespace {

using test::run_process;

std::vector<std::string> command(const std::vector<std::string>& args) {
    std::vector<std::string> argv = test::tessera_cmd({});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& extra) {
    base.insert(base.end(), extra.begin(), extra.end());
    return base;
}

// "Final estimate: PPL = 12.3456 +/- ..." and the chunk line before it.
std::string estimate(const std::string& out) {
    const size_t at = out.find("Final estimate");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
}

double stat(const std::string& out, const std::string& label) {
    const size_t at = out.find(label);
    if (at == std::string::npos) return -1.0;
    return std::stod(out.substr(out.find(':', at) + 1));
}

double final_ppl(const std::string& out) {
    const std::string label = "Final estimate: PPL = ";
    const size_t at = out.find(label);
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + label.size()));
}

// A llama-shaped model whose heads are 32 wide: one block of Q8_0 or Q4_0.
std::string make_model(const std::string& dir) {
    const std::string model = dir + "/model.gguf";
    const auto gen = run_process(command({"gen-model", "--dim", "256", "--layers", "4", "--heads", "8", "--kv-heads",
                                          "4", "--ffn", "512", "--type", "Q8_0", "-q", "-o", model}),
                                 60);
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    return model;
}

const std::vector<std::string> kSparse = {"--attention", "sparse", "--sparse-window", "16", "--sparse-block", "8"};

}  // namespace

TEST(KvCacheTypesCli, EveryPlanEqualsOneProcessWithTheSameTypes) {
    const std::string dir = test::test_dir("kv_types_plans");
    const std::string model = make_model(dir);
    const std::vector<std::string> run = {"run", "-m", model, "-p", "Once upon a time there was a little girl",
                                          "-n", "24", "--temp", "0", "--ignore-eos", "--json", "-ctk", "q8_0",
                                          "-ctv", "q4_0"};
    const auto single = run_process(command(run), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    const std::vector<int> want = test::tokens_of(single);
    ASSERT_EQ(want.size(), 24u);

    const auto local3 = run_process(command(with(run, {"--local", "3", "--exact"})), 60);
    ASSERT_EQ(local3.exit_code, 0) << local3.err;
    EXPECT_EQ(test::tokens_of(local3), want) << "--local 3";

    std::unique_ptr<test::BackgroundProcess> worker;
    const auto pipeline = run_process(command(with(run, {"--stages", "root/" + test::start_worker(worker, model)})), 60);
    ASSERT_EQ(pipeline.exit_code, 0) << pipeline.err;
    EXPECT_EQ(test::tokens_of(pipeline), want) << "2-stage pipeline";

    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "4",
                                          "--cache-type", "q4_0"};
    const auto one = run_process(command(ppl), 60);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto three = run_process(command(with(ppl, {"--local", "3"})), 60);
    ASSERT_EQ(three.exit_code, 0) << three.err;
    EXPECT_GT(final_ppl(one.out), 1.0) << one.out;
    EXPECT_EQ(final_ppl(three.out), final_ppl(one.out)) << three.out;
}

TEST(KvCacheTypesCli, QuantizedCachesMoveTheLogitsQ4_0MoreThanQ8_0) {
    const std::string dir = test::test_dir("kv_types_kl");
    const std::string model = make_model(dir);
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::string base = dir + "/f16.kld";
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "6"};
    const auto made = run_process(command(with(ppl, {"--kl-divergence-base", base})), 60);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    double kld[2];
    double same_top[2];
    int i = 0;
    for (const char* type : {"q8_0", "q4_0"}) {
        const auto r = run_process(
            command(with(ppl, {"--kl-divergence", "--kl-divergence-base", base, "--cache-type", type})), 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        kld[i] = stat(r.out, "Mean    KLD");
        same_top[i] = stat(r.out, "Same top p:");
        EXPECT_GT(kld[i], 0.0) << type << "\n" << r.out;
        ++i;
    }
    EXPECT_LT(kld[0], kld[1]) << "q8_0 against q4_0";
    EXPECT_GE(same_top[0], same_top[1]);
    EXPECT_GT(same_top[0], 90.0);
}

TEST(KvCacheTypesCli, PlanCountsTheCacheAndBadTypesAreClearErrors) {
    const std::string dir = test::test_dir("kv_types_errors");
    const std::string model = make_model(dir);
    uint64_t kv_bytes[2];
    int i = 0;
    for (const char* type : {"f16", "q8_0"}) {
        const auto r = run_process(command({"plan", "-m", model, "--local", "2", "-c", "256", "--json",
                                            "--cache-type", type}),
                                   60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        kv_bytes[i] = 0;
        const nlohmann::json plan = nlohmann::json::parse(r.out);
        for (const auto& node : plan.at("nodes")) kv_bytes[i] += node.at("kv_bytes").get<uint64_t>();
        ++i;
    }
    // 4 layers x 4 KV heads x 256 positions x (K + V): 64 F16 bytes a row, 34 Q8_0.
    EXPECT_EQ(kv_bytes[0], 4ull * 4 * 256 * 2 * 64);
    EXPECT_EQ(kv_bytes[1], 4ull * 4 * 256 * 2 * 34);

    auto r = run_process(command({"run", "-m", model, "-p", "hi", "-n", "2", "-ctk", "q5_0"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--cache-type-k must be f32, f16, q8_0 or q4_0 (got 'q5_0')"), std::string::npos) << r.err;
    // The bundled model's heads are 8 wide: no whole block of 32.
    r = run_process(command({"run", "-p", "hi", "-n", "2", "--cache-type-v", "q4_0"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("a Q4_0 cache of values needs a head width that is a multiple of 32 (this model's is 8)"),
              std::string::npos)
        << r.err;
}

TEST(SparseAttentionCli, EveryPlanEqualsOneProcessWithTheSameOptions) {
    const std::string dir = test::test_dir("sparse_plans");
    const std::string model = make_model(dir);
    const std::vector<std::string> run = {"run", "-m", model, "-p", "Once upon a time there was a little girl",
                                          "-n", "48", "--temp", "0", "--ignore-eos", "--json"};
    for (const char* landmarks : {"all", "log"}) {
        const std::vector<std::string> sparse_run = with(with(run, kSparse), {"--sparse-landmarks", landmarks});
        const auto single = run_process(command(sparse_run), 60);
        ASSERT_EQ(single.exit_code, 0) << single.err;
        const std::vector<int> want = test::tokens_of(single);
        ASSERT_EQ(want.size(), 48u);
        const auto local3 = run_process(command(with(sparse_run, {"--local", "3", "--exact"})), 60);
        ASSERT_EQ(local3.exit_code, 0) << local3.err;
        EXPECT_EQ(test::tokens_of(local3), want) << "--local 3, landmarks " << landmarks;
        std::unique_ptr<test::BackgroundProcess> worker;
        const auto pipeline =
            run_process(command(with(sparse_run, {"--stages", "root/" + test::start_worker(worker, model)})), 60);
        ASSERT_EQ(pipeline.exit_code, 0) << pipeline.err;
        EXPECT_EQ(test::tokens_of(pipeline), want) << "2-stage pipeline, landmarks " << landmarks;
    }

    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "128", "--chunks", "3"};
    const auto dense = run_process(command(ppl), 60);
    ASSERT_EQ(dense.exit_code, 0) << dense.err;
    ASSERT_FALSE(estimate(dense.out).empty()) << dense.out;
    const auto covering = run_process(command(with(ppl, {"--attention", "sparse", "--sparse-window", "128"})), 60);
    ASSERT_EQ(covering.exit_code, 0) << covering.err;
    EXPECT_EQ(estimate(covering.out), estimate(dense.out)) << "a window over the whole chunk is dense";
    const auto sparse = run_process(command(with(ppl, kSparse)), 60);
    ASSERT_EQ(sparse.exit_code, 0) << sparse.err;
    EXPECT_NE(estimate(sparse.out), estimate(dense.out)) << "a window of 16 changed nothing";
    const auto sparse3 = run_process(command(with(with(ppl, kSparse), {"--local", "3"})), 60);
    ASSERT_EQ(sparse3.exit_code, 0) << sparse3.err;
    EXPECT_EQ(estimate(sparse3.out), estimate(sparse.out)) << "--local 3";
}

TEST(ContextFullCli, ShiftAndEvictGoOnPastTheContextOnEveryPlan) {
    const std::string dir = test::test_dir("context_shift_plans");
    const std::string model = make_model(dir);
    const std::vector<std::string> run = {"run", "-m", model, "-p", "Once upon a time", "-c", "40", "-n", "150",
                                          "--temp", "0", "--ignore-eos", "--json"};
    const auto stopped = run_process(command(run), 60);
    ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
    EXPECT_NE(stopped.out.find("\"stop_reason\":\"context\""), std::string::npos) << stopped.out;
    EXPECT_LT(test::tokens_of(stopped).size(), 40u);

    // Shift and evict, dense with an F16 cache and sparse over a Q8_0 cache
    // (landmarks recomputed as blocks move); evict ranks by attention every
    // node counted.
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"--context-full", "shift", "--keep", "2"},
          std::vector<std::string>{"--context-full", "shift", "-ctk", "q8_0", "--attention", "sparse", "--sparse-window",
                                   "8", "--sparse-block", "4"},
          std::vector<std::string>{"--context-full", "evict", "--keep", "2", "--evict-recent", "6"},
          std::vector<std::string>{"--context-full", "evict", "-ctk", "q8_0", "--attention", "sparse", "--sparse-window",
                                   "8", "--sparse-block", "4"}}) {
        const std::vector<std::string> shifted_run = with(run, extra);
        const auto single = run_process(command(shifted_run), 60);
        ASSERT_EQ(single.exit_code, 0) << single.err;
        const std::vector<int> want = test::tokens_of(single);
        ASSERT_EQ(want.size(), 150u) << single.out;
        EXPECT_NE(single.out.find("\"context_shifts\":"), std::string::npos);
        EXPECT_EQ(single.out.find("\"context_shifts\":0"), std::string::npos) << single.out;
        const auto local3 = run_process(command(with(shifted_run, {"--local", "3", "--exact"})), 60);
        ASSERT_EQ(local3.exit_code, 0) << local3.err;
        EXPECT_EQ(test::tokens_of(local3), want) << "--local 3";
        std::unique_ptr<test::BackgroundProcess> worker;
        const auto pipeline =
            run_process(command(with(shifted_run, {"--stages", "root/" + test::start_worker(worker, model)})), 60);
        ASSERT_EQ(pipeline.exit_code, 0) << pipeline.err;
        EXPECT_EQ(test::tokens_of(pipeline), want) << "2-stage pipeline";
    }
    const auto bad = run_process(command(with(run, {"--context-full", "wrap"})), 60);
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("--context-full must be stop, shift or evict (got 'wrap')"), std::string::npos) << bad.err;
    const auto recent = run_process(command(with(run, {"--context-full", "evict", "--evict-recent", "30"})), 60);
    EXPECT_EQ(recent.exit_code, 1);
    EXPECT_NE(recent.err.find("--evict-recent 30 must be under half the context (40)"), std::string::npos) << recent.err;
}

TEST(SparseAttentionCli, BadValuesAreClearErrors) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--attention", "fast"}, "--attention must be dense or sparse (got 'fast')"},
        {{"--attention", "sparse", "--sparse-window", "0"}, "--sparse-window must be 1"},
        {{"--attention", "sparse", "--sparse-block", "-2"}, "--sparse-block must be 1"},
        {{"--attention", "sparse", "--sparse-landmarks", "some"}, "--sparse-landmarks must be all, log or off"},
        {{"--attention", "sparse", "--sparse-log-stride", "yes"}, "--sparse-log-stride must be on or off"},
    };
    for (const auto& [flags, want] : cases) {
        const auto r = run_process(command(with({"run", "-p", "hi", "-n", "2"}, flags)), 60);
        EXPECT_EQ(r.exit_code, 1) << want;
        EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    }
}

}  // namespace tessera
