// Speculative decoding end to end (`tessera run --draft-model / --draft
// ngram`): greedy output equals plain greedy output token for token on a
// single node, on --local 3, on a 3-stage pipeline and on a hybrid plan, with
// a good draft (the bundled model quantized), a bad one (random weights, same
// vocabulary) and n-gram drafts; a draft with another vocabulary is refused.
#include "tessera_cli.h"
#include "test_paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {

using test::BackgroundProcess;
using test::run_process;
using test::tessera_cmd;

namespace {

nlohmann::json speculative_json(const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> argv = {test::tessera_binary(), "run", "-m", model, "-p", "Once upon a time", "-n", "80",
                                     "--temp", "0", "--ignore-eos", "--json", "-t", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = run_process(argv, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

}  // namespace

TEST(SpeculativeCli, GreedyOutputEqualsPlainOnEveryPlan) {
    const std::string dir = test::test_dir("speculative_cli");
    const std::string model = test::stories260k();
    const std::string good = dir + "/good-q8_0.gguf", bad = dir + "/bad.gguf";
    ASSERT_EQ(run_process(tessera_cmd({"quantize", model, good, "Q8_0"}), 60).exit_code, 0);
    ASSERT_EQ(run_process(tessera_cmd({"gen-model", "--vocab-from", model, "--dim", "64", "--layers", "2", "--heads", "4",
                                       "--kv-heads", "4", "--ffn", "128", "--seed", "7", "-q", "-o", bad}),
                          60)
                  .exit_code,
              0);
    const nlohmann::json plain = speculative_json(model, {});
    const auto want = plain["tokens"].get<std::vector<int>>();
    ASSERT_EQ(want.size(), 80u);
    const std::vector<std::vector<std::string>> drafts = {
        {"--draft-model", good}, {"--draft-model", bad}, {"--draft", "ngram"}, {"--draft-model", good, "--draft-ahead"}};
    for (const char* plan : {"single", "local3", "pipeline3", "hybrid"}) {
        for (const auto& draft : drafts) {
            SCOPED_TRACE(fmt::format("{} {}", plan, fmt::join(draft, " ")));
            std::vector<std::unique_ptr<BackgroundProcess>> workers(2);
            std::vector<std::string> args = draft;
            const std::string p = plan;
            if (p == "local3") args.insert(args.end(), {"--local", "3"});
            if (p == "pipeline3") {
                args.insert(args.end(), {"--stages", "root/" + test::start_worker(workers[0], model) + "/" +
                                                         test::start_worker(workers[1], model)});
            }
            if (p == "hybrid") {
                args.insert(args.end(), {"--stages", "root," + test::start_worker(workers[0], model) + "/" +
                                                         test::start_worker(workers[1], model)});
            }
            const nlohmann::json got = speculative_json(model, args);
            ASSERT_TRUE(got.contains("speculative")) << plan << " " << draft[1];
            EXPECT_EQ(got["tokens"].get<std::vector<int>>(), want) << plan << " " << draft[1];
            EXPECT_GT(got["speculative"]["drafted"].get<int>(), 0) << plan << " " << draft[1];
            if (draft[1] == good) {
                // A good draft saves traversals: fewer than one per token.
                EXPECT_LT(got["speculative"]["traversals"].get<int>(), 60) << plan;
            }
            if (draft.size() > 2) {
                // Drafted ahead: some traversals start on a draft made during
                // the one before (a good draft stands whole often).
                EXPECT_GT(got["speculative"]["drafts_ahead"].get<int>(), 0) << plan;
            } else {
                EXPECT_FALSE(got["speculative"].contains("drafts_ahead")) << plan;
            }
        }
    }
}

TEST(SpeculativeCli, ADraftWithAnotherVocabularyIsRefused) {
    const std::string dir = test::test_dir("speculative_cli_vocab");
    const std::string other = dir + "/other.gguf";
    ASSERT_EQ(run_process(tessera_cmd({"gen-model", "--vocab", "300", "--dim", "64", "--layers", "1", "--heads", "4",
                                       "--kv-heads", "4", "--ffn", "128", "-q", "-o", other}),
                          60)
                  .exit_code,
              0);
    const auto r = run_process(tessera_cmd({"run", "-m", test::stories260k(), "-p", "Once", "-n",
                                            "4", "--draft-model", other}),
                               60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("another vocabulary"), std::string::npos) << r.err;
    // Wrong draft flags are clear errors too.
    const std::string model = test::stories260k();
    for (const auto& [flags, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--draft", "ngram", "--draft-model", other}, "either --draft-model or --draft"},
             {{"--draft", "ngram", "--draft-min", "5", "--draft-max", "3"}, "--draft-min 5 is above --draft-max 3"},
             {{"--draft", "ngram", "--draft-max", "40"}, "--draft-max"},
             {{"--draft", "bigram"}, "--draft"},
             {{"--draft-model", dir + "/missing.gguf"}, "missing.gguf"},
             {{"--draft-ahead"}, "--draft-ahead needs a drafter"},
             {{"--draft-ahead=maybe", "--draft", "ngram"}, "--draft-ahead"}}) {
        std::vector<std::string> argv = {test::tessera_binary(), "run", "-m", model, "-p", "Once", "-n", "4"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        const auto bad = run_process(argv, 60);
        EXPECT_NE(bad.exit_code, 0) << flags[0];
        EXPECT_NE(bad.err.find(want), std::string::npos) << bad.err;
    }
    // serve's slots verify in shared batches: it has no --draft-ahead.
    const auto serve = run_process(tessera_cmd({"serve", "-m", model, "--draft", "ngram", "--draft-ahead"}), 60);
    EXPECT_NE(serve.exit_code, 0);
    EXPECT_NE(serve.err.find("--draft-ahead"), std::string::npos) << serve.err;
}

}  // namespace tessera
