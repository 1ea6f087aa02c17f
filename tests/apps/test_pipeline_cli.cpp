// Pipeline and hybrid plans end to end, every node a real process on a real
// TCP port: `run --stages` and `run --cluster` equal a single process token
// for token; `plan` prints per node the layers, heads, channels and bytes a
// run would use.
#include "slow_model.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <thread>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;

using test::tokens_of;

using test::start_worker;

std::string bundled_model() { return test::source_dir() + "/models/stories260K.gguf"; }

}  // namespace

TEST(PipelineCli, StagesAndClusterFileEqualOneProcess) {
    const auto single =
        run_process(test::tessera_cmd({"run", "-p", "Once upon a time", "-n", "40", "--temp", "0", "--json"}), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    {
        std::unique_ptr<BackgroundProcess> a, b;
        const std::string sa = start_worker(a, bundled_model()), sb = start_worker(b, bundled_model());
        const auto r = run_process(test::tessera_cmd({"run", "--stages", "root/" + sa + "/" + sb, "-p",
                                                      "Once upon a time", "-n", "40", "--temp", "0", "--json"}),
                                   60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(tokens_of(r), tokens_of(single));
        EXPECT_EQ(nlohmann::json::parse(r.out)["stages"], 3);
    }
    {
        // Hybrid: the root and one tensor-parallel rank, then a stage.
        std::unique_ptr<BackgroundProcess> a, b;
        const std::string sa = start_worker(a, bundled_model()), sb = start_worker(b, bundled_model());
        const std::string file = test::scratch_dir("pipeline_cli") + "/cluster.toml";
        std::ofstream(file) << "[[stage]]\nnodes = [\"root\", \"" << sa << "\"]\nlayers = 3\n\n[[stage]]\nnodes = [\""
                            << sb << "\"]\nlayers = 2\n";
        const auto r = run_process(test::tessera_cmd({"run", "--cluster", file, "-p", "Once upon a time", "-n", "40",
                                                      "--temp", "0", "--json"}),
                                   60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(tokens_of(r), tokens_of(single));
    }
}

TEST(PipelineCli, AStageWithAnotherModelIsRefused) {
    std::unique_ptr<BackgroundProcess> a;
    const std::string sa = start_worker(a, test::write_slow_model(test::scratch_dir("pipeline_cli")));
    const auto r = run_process(test::tessera_cmd({"run", "--stages", "root/" + sa, "-p", "Once", "-n", "4"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("stage 1 (" + sa + ") holds a different model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

// SIGKILL (connections close) and SIGSTOP (the stage falls silent: only its
// missing heartbeats tell) the last of three stages a second into a run.
TEST(PipelineCli, DeadOrStalledStageIsReportedWithinFiveSeconds) {
    const std::string model = test::write_slow_model(test::scratch_dir("pipeline_cli"));
    for (int sig : {SIGKILL, SIGSTOP}) {
        std::unique_ptr<BackgroundProcess> w1, w2;
        const std::string a1 = start_worker(w1, model);
        const std::string a2 = start_worker(w2, model);
        test::ProcessResult root;
        std::thread runner([&] {
            root =
                run_process(test::tessera_cmd({"run", "-m", model, "--stages", "root/" + a1 + "/" + a2, "-n", "3000",
                                               "-c", "3100", "--temp", "0", "-t", "1", "--json", "--recover-ms", "0"}),
                            60);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        const auto stopped = std::chrono::steady_clock::now();
        w2->signal(sig);
        runner.join();
        const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
        EXPECT_EQ(root.exit_code, 1) << "signal " << sig << ": " << root.err;
        EXPECT_LT(after, 6.0) << "signal " << sig;  // 5 s plus process exit
        EXPECT_NE(root.err.find(a2), std::string::npos) << root.err;
        if (sig == SIGSTOP) {
            EXPECT_NE(root.err.find("stage 2 (" + a2 + ") stalled"), std::string::npos) << root.err;
            w2->signal(SIGCONT);
        }
    }
}

TEST(PipelineCli, PlanPrintsEveryNodesShareWithoutRunning) {
    // Nothing listens on these ports: plan contacts no node.
    const auto r = run_process(test::tessera_cmd({"plan", "--stages", "root,127.0.0.1:1/127.0.0.1:2", "--stage-layers",
                                                  "3,2", "-c", "256", "--json"}),
                               30);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    const auto& nodes = plan["nodes"];
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0]["node"], "root");
    EXPECT_EQ(nodes[0]["layers"], nlohmann::json::array({0, 3}));
    EXPECT_EQ(nodes[1]["layers"], nlohmann::json::array({0, 3}));
    EXPECT_EQ(nodes[2]["layers"], nlohmann::json::array({3, 5}));
    // The first stage's two ranks split its 4 KV heads; the last stage holds all.
    EXPECT_EQ(nodes[0]["kv_heads"], nlohmann::json::array({0, 2}));
    EXPECT_EQ(nodes[1]["kv_heads"], nlohmann::json::array({2, 4}));
    EXPECT_EQ(nodes[2]["kv_heads"], nlohmann::json::array({0, 4}));
    EXPECT_TRUE(nodes[0]["embeds"].get<bool>());
    EXPECT_TRUE(nodes[2]["outputs"].get<bool>());
    // KV bytes: 2 (K and V) x layers x kv heads x head dim 8 x 256 positions x 2 bytes (F16).
    EXPECT_EQ(nodes[0]["kv_bytes"], 2 * 3 * 2 * 8 * 256 * 2);
    EXPECT_EQ(nodes[2]["kv_bytes"], 2 * 2 * 4 * 8 * 256 * 2);
    EXPECT_GT(nodes[1]["weight_bytes"].get<uint64_t>(), 0u);

    const auto table = run_process(test::tessera_cmd({"plan", "--local", "3"}), 30);
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("local worker 2"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("weights MiB"), std::string::npos) << table.out;

    const auto bad =
        run_process(test::tessera_cmd({"plan", "--stages", "root/127.0.0.1:1", "--stage-layers", "4,4"}), 30);
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("add up to 8, the model has 5"), std::string::npos) << bad.err;
}

}  // namespace tessera
