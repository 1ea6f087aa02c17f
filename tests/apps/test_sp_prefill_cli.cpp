// Sequence-parallel prefill end to end, every node a real process on a real
// TCP port: `run --local N --prefill sp` and `--workers ... --prefill sp`
// give one process's greedy tokens for a prompt several batches long, and
// report each node's chunk and bytes, also when generation is handed to a
// tensor-parallel group or a pipeline of the nodes (--generate); modes it
// cannot serve are clear errors.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <sstream>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;
using test::start_worker;
using test::tokens_of;

std::string bundled_model() { return test::source_dir() + "/models/stories260K.gguf"; }

// About 700 tokens of real text: several batches of 64.
std::string long_prompt() {
    std::ifstream in(test::source_dir() + "/tests/data/little_stories.txt");
    std::stringstream text;
    text << in.rdbuf();
    return text.str().substr(0, 1500);
}

// The command line of `tessera run` on the long prompt, with `extra` flags.
std::vector<std::string> run_args(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = test::tessera_cmd({"run", "-p", long_prompt(), "-n", "24", "--temp", "0", "-b", "64", "--json"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

}  // namespace

TEST(SpPrefillCli, LocalAndWorkersEqualOneProcess) {
    const auto single = run_process((run_args({})), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    for (const std::vector<std::string>& plan :
         {std::vector<std::string>{"--local", "2", "--prefill", "sp"}, {"--local", "3", "--prefill", "sp", "--weights", "1,2,1"}}) {
        const auto r = run_process((run_args(plan)), 90);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(tokens_of(r), tokens_of(single));
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["prefill"].size(), static_cast<size_t>(std::stoi(plan[1])));
        int covered = 0;
        for (const auto& node : j["prefill"]) {
            EXPECT_GT(node["tokens"].get<int>(), 0) << r.out;
            covered += node["tokens"].get<int>();
        }
        EXPECT_EQ(covered, j["prompt_tokens"].get<int>());
        EXPECT_GT(j["prefill"][1]["bytes_received"].get<int64_t>(), 0) << "the worker's rows came back";
    }
    {
        std::unique_ptr<BackgroundProcess> a;
        const std::string wa = start_worker(a, bundled_model());
        const auto r = run_process((run_args({"--workers", wa, "--prefill", "sp"})), 90);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(tokens_of(r), tokens_of(single));
    }
    // The plan line names each node's chunk and bytes.
    const auto text = run_process(test::tessera_cmd({"run", "-p", long_prompt(), "-n", "4", "--temp", "0", "-b", "64",
                                                     "--local", "2", "--prefill", "sp"}),
                                  90);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.err.find("prefill node 1 127.0.0.1:"), std::string::npos) << text.err;
    EXPECT_NE(text.err.find("positions 0.."), std::string::npos) << text.err;
}

TEST(SpPrefillCli, GenerationHandedToAGroupOrAPipelineEqualsOneProcess) {
    const auto single = run_process((run_args({})), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    for (const std::vector<std::string>& plan :
         {std::vector<std::string>{"--local", "2", "--prefill", "sp", "--generate", "tp"},
          {"--local", "3", "--prefill", "sp", "--generate", "tp", "--weights", "1,2,1"},
          {"--local", "3", "--prefill", "sp", "--generate", "pipeline", "--stage-layers", "1,3,1"}}) {
        const auto r = run_process((run_args(plan)), 90);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(tokens_of(r), tokens_of(single));
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_TRUE(j.contains("handoff")) << r.out;
        EXPECT_EQ(j["handoff"]["plan"], plan[5]);
        EXPECT_EQ(j["handoff"]["nodes"].get<size_t>(), static_cast<size_t>(std::stoi(plan[1])));
        EXPECT_EQ(j["handoff"]["positions"], j["prompt_tokens"]) << "handed over at the first step";
        EXPECT_NE(r.err.find("generation handed over: serving layers"), std::string::npos) << r.err;
        if (plan[5] == "pipeline") {
            // Stage 1 keeps layers 1..4 only.
            EXPECT_NE(r.err.find("serving layers [1, 4), KV heads [0, 4), FFN channels [0, 172) to"), std::string::npos)
                << r.err;
        }
    }
    const auto text = run_process(test::tessera_cmd({"run", "-p", long_prompt(), "-n", "4", "--temp", "0", "-b", "64",
                                                     "--local", "2", "--prefill", "sp", "--generate", "tp"}),
                                  90);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.err.find("generation: a tensor-parallel group of the 2 nodes"), std::string::npos) << text.err;
    EXPECT_NE(text.err.find("generation handed to 2 ranks after"), std::string::npos) << text.err;
    const auto alone = run_process((run_args({"--local", "2", "--generate", "tp"})), 60);
    EXPECT_NE(alone.exit_code, 0);
    EXPECT_NE(alone.err.find("--generate tp"), std::string::npos) << alone.err;
}

TEST(SpPrefillCli, ModesItCannotServeAreClearErrors) {
    const auto fast = run_process((run_args({"--local", "2", "--prefill", "sp", "--fast"})), 60);
    EXPECT_NE(fast.exit_code, 0);
    EXPECT_NE(fast.err.find("--prefill sp is exact"), std::string::npos) << fast.err;
    const auto stages = run_process((run_args({"--stages", "root/127.0.0.1:9", "--prefill", "sp"})), 60);
    EXPECT_NE(stages.exit_code, 0);
    EXPECT_NE(stages.err.find("--prefill sp runs over --local or --workers"), std::string::npos) << stages.err;
    const auto bad = run_process((run_args({"--prefill", "astra"})), 60);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--prefill"), std::string::npos) << bad.err;
}

}  // namespace tessera

namespace tessera {

TEST(SpPrefillCli, FittedCodebooksCompressTheExchangeAndEvalMeasuresIt) {
    const std::string dir = test::scratch_dir("sp_prefill_cli_vq");
    const std::string books = dir + "/books.gguf";
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const auto fit = run_process(test::tessera_cmd({"vq-fit", "-f", text, "-o", books, "--groups", "4", "--codes", "128",
                                                    "--iterations", "4", "-t", "1"}),
                                 120);
    ASSERT_EQ(fit.exit_code, 0) << fit.err;
    EXPECT_NE(fit.err.find("4 groups of 8 values, 128 codes: 56 bits a position and layer"), std::string::npos) << fit.err;
    const auto eval = run_process(test::tessera_cmd({"vq-eval", "--codebooks", books, "-f", text, "--prompt-tokens", "200",
                                                     "--positions", "16", "--local", "2", "-b", "32", "--json"}),
                                  120);
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    const nlohmann::json j = nlohmann::json::parse(eval.out);
    EXPECT_EQ(j["exact"]["kl_max"].get<double>(), 0.0) << "the exact exchange gives one node's logits";
    EXPECT_EQ(j["exact"]["top1"].get<double>(), 1.0);
    EXPECT_GT(j["compressed"]["kl_mean"].get<double>(), 0.0);
    EXPECT_LT(j["compressed"]["kl_mean"].get<double>(), 0.5);
    EXPECT_EQ(j["bits_per_position_layer"], 56);
    // run uses them, and says so.
    const auto r = run_process(test::tessera_cmd({"run", "-p", long_prompt(), "-n", "4", "--temp", "0", "-b", "64", "--local",
                                                  "2", "--prefill", "sp", "--codebooks", books}),
                               90);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("prefill exchange: codebook indices, 56 bits"), std::string::npos) << r.err;
    const auto alone = run_process(run_args({"--codebooks", books}), 60);
    EXPECT_NE(alone.exit_code, 0);
    EXPECT_NE(alone.err.find("it needs --prefill sp"), std::string::npos) << alone.err;
}

}  // namespace tessera

namespace tessera {

TEST(SpPrefillCli, PlanShowsEachNodesChunkAndBytes) {
    const auto r = run_process(test::tessera_cmd({"plan", "--local", "3", "--prefill", "sp", "--prompt-tokens", "700", "-b",
                                                  "64", "--weights", "1,2,1", "--json"}),
                               60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 3u);
    // 11 batches of 64 for weights 1 : 2 : 1, cut by cost: later positions
    // attend to more of the prompt (on this small model attention is most of
    // a position's work), so the chunks shrink along the prompt: 5, 4 and 2
    // batches, the last one short.
    EXPECT_EQ(j["nodes"][0]["tokens"], 320);
    EXPECT_EQ(j["nodes"][1]["tokens"], 256);
    EXPECT_EQ(j["nodes"][2]["tokens"], 124);
    EXPECT_EQ(j["nodes"][2]["pos0"], 576);
    // Each node's rows go through the root: what the root sends, the others receive.
    EXPECT_EQ(j["nodes"][0]["bytes_sent"].get<uint64_t>(),
              j["nodes"][1]["bytes_received"].get<uint64_t>() + j["nodes"][2]["bytes_received"].get<uint64_t>());
    // Node 2 receives the 576 positions before it: 128 bytes each in 5 layers,
    // plus a header for each of 9 messages a layer.
    EXPECT_GE(j["nodes"][2]["bytes_received"].get<uint64_t>(), 576u * 128 * 5);
    EXPECT_LT(j["nodes"][2]["bytes_received"].get<uint64_t>(), 576u * 128 * 5 + 5 * 9 * 12 + 1);
}

}  // namespace tessera
