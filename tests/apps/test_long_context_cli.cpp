// Long context end to end: sparse attention (--attention sparse) on every
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
