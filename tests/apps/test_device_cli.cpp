// --device vulkan end to end (lavapipe in CI): a single node, a pipeline
// stage, a tensor-parallel rank and a hybrid plan's ranks (the root's, a
// group leader's, a member's) on the GPU
// generate the CPU's tokens,
// perplexity gives the CPU's figure, and what the device does not run yet
// (a sequence-parallel chunk, an unknown device) is refused with a message
// saying so. A binary built
// without the backend says that instead.
#include "tessera_cli.h"

#include "model/random_model.h"
#include "test_build.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

bool has_vulkan() {
    const auto r = test::run_process(test::tessera_cmd({"devices", "--json"}), 60);
    if (r.exit_code != 0) return false;
    const auto j = nlohmann::json::parse(r.out);
    return j.contains("vulkan") && j["vulkan"].is_array() && !j["vulkan"].empty();
}

// The last line of `tessera perplexity` ("Final estimate: PPL = ...").
std::string final_estimate(const std::vector<std::string>& extra) {
    std::vector<std::string> args = test::tessera_cmd(
        {"perplexity", "-f", test::data_dir() + "/little_stories.txt", "-c", "128", "--chunks", "3"});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_process(args, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("Final estimate");
    return at == std::string::npos ? r.out + r.err : r.out.substr(at);
}

TEST(DeviceCli, AGpuNodeStageAndRankGenerateTheCpuTokens) {
    if (!has_vulkan()) {
        const auto r = test::run_process(test::tessera_cmd({"run", "-n", "2", "--device", "vulkan"}), 60);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find("built without the Vulkan backend"), std::string::npos) << r.err;
        GTEST_SKIP() << "no Vulkan device in this build";
    }
    const std::string stories = test::stories260k();
    const std::vector<int> cpu = test::greedy_tokens(stories);
    ASSERT_EQ(cpu.size(), 24u);
    EXPECT_EQ(test::greedy_tokens(stories, {"--device", "vulkan"}), cpu);
    EXPECT_EQ(test::greedy_tokens(stories, {"--device", "vulkan:0", "-b", "4"}), cpu);
    EXPECT_EQ(test::greedy_tokens(stories, {"--device", "vulkan", "-ngl", "3"}), cpu);  // 3 of 5 layers on the GPU
    // Shifting, eviction and sparse attention on the GPU: under the
    // sanitizers the VulkanForward tests of compacted contexts and tracked
    // attention run that host code, and this test keeps its plans (see
    // test_build.h).
    if (!test::kSanitized) {
        // A context of 24 shifted along the way.
        const std::vector<std::string> shift = {"-c", "24", "--context-full", "shift"};
        std::vector<std::string> on_gpu = shift;
        on_gpu.insert(on_gpu.end(), {"--device", "vulkan"});
        EXPECT_EQ(test::greedy_tokens(stories, on_gpu), test::greedy_tokens(stories, shift));
        const std::vector<std::string> evict = {"-c", "24", "--context-full", "evict"};  // by the attention received
        on_gpu = evict;
        on_gpu.insert(on_gpu.end(), {"--device", "vulkan"});
        EXPECT_EQ(test::greedy_tokens(stories, on_gpu), test::greedy_tokens(stories, evict));
        // Sparse attention past its window of 4 (landmarks of 4 positions, every
        // block before the window or ruvllm's log choice).
        for (const std::vector<std::string>& sparse :
             {std::vector<std::string>{"--attention", "sparse", "--sparse-window", "4", "--sparse-block", "4"},
              std::vector<std::string>{"--attention", "sparse", "--sparse-window", "4", "--sparse-block", "4",
                                       "--sparse-landmarks", "log"}}) {
            const std::vector<int> sparse_cpu = test::greedy_tokens(stories, sparse);
            on_gpu = sparse;
            on_gpu.insert(on_gpu.end(), {"--device", "vulkan"});
            EXPECT_EQ(test::greedy_tokens(stories, on_gpu), sparse_cpu);
        }
    }

    // A K-quant file, and a stage of a pipeline on the GPU.
    const std::string dir = test::scratch_dir("device_cli");
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 4;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.vocab_from = stories;
    spec.type = QuantType::Q4_K;
    const std::string q4k = dir + "/q4k.gguf";
    write_random_model(spec, q4k);
    const std::vector<int> q4k_cpu = test::greedy_tokens(q4k);
    EXPECT_EQ(test::greedy_tokens(q4k, {"--device", "vulkan"}), q4k_cpu);
    std::unique_ptr<test::BackgroundProcess> worker;
    const std::string address = test::start_worker(worker, q4k, "", {"--device", "vulkan"});
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root/" + address}), q4k_cpu);
    std::unique_ptr<test::BackgroundProcess> cpu_stage;  // the root's stage on the GPU, the worker's on its CPU
    const std::string cpu_address = test::start_worker(cpu_stage, q4k);
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root/" + cpu_address, "--device", "vulkan"}), q4k_cpu);
    std::unique_ptr<test::BackgroundProcess> split;  // one of the stage's layers on the GPU, one on the CPU
    const std::string split_address = test::start_worker(split, q4k, "", {"--device", "vulkan", "--gpu-layers", "1"});
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root/" + split_address}), q4k_cpu);

    // A tensor-parallel group of three (the model's two KV heads: one rank
    // holds none), one rank on the GPU: --exact gives the single node's bits.
    std::unique_ptr<test::BackgroundProcess> rank_gpu, rank_cpu;
    const std::string gpu_rank = test::start_worker(rank_gpu, q4k, "", {"--device", "vulkan"});
    const std::string cpu_rank = test::start_worker(rank_cpu, q4k);
    EXPECT_EQ(test::greedy_tokens(q4k, {"--workers", gpu_rank + "," + cpu_rank, "--exact"}), q4k_cpu);
    // --local 3 with the root's rank on the GPU, the other two on the CPU.
    EXPECT_EQ(test::greedy_tokens(q4k, {"--local", "3", "--exact", "--device", "vulkan"}), q4k_cpu);
    const auto short_rank = test::run_process(
        test::tessera_cmd({"run", "-m", q4k, "-n", "2", "--local", "2", "--device", "vulkan", "-ngl", "3"}), 60);
    EXPECT_NE(short_rank.exit_code, 0);
    EXPECT_NE(short_rank.err.find("--gpu-layers 3: a tensor-parallel rank keeps all 4 of its layers on the device"),
              std::string::npos)
        << short_rank.err;
    // A hybrid plan: the root's stage a tensor-parallel group of the root (on
    // the GPU) and a CPU worker, then a stage on a GPU worker; and the same
    // with the group's worker on the GPU and the root on its CPU. (A worker
    // serves one session: fresh ones for each plan.)
    std::vector<std::unique_ptr<test::BackgroundProcess>> hybrid(6);
    const std::string h_cpu_rank = test::start_worker(hybrid[0], q4k);
    const std::string h_gpu_stage = test::start_worker(hybrid[1], q4k, "", {"--device", "vulkan"});
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root," + h_cpu_rank + "/" + h_gpu_stage, "--device", "vulkan"}),
              q4k_cpu);
    const std::string h_gpu_rank = test::start_worker(hybrid[2], q4k, "", {"--device", "vulkan"});
    const std::string h_cpu_stage = test::start_worker(hybrid[3], q4k);
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root," + h_gpu_rank + "/" + h_cpu_stage}), q4k_cpu);
    // The second stage a group led by a GPU worker (its rank on the device)
    // with a CPU worker; then led by a CPU worker with a GPU member.
    std::vector<std::unique_ptr<test::BackgroundProcess>> led(4);
    const std::string g_leader = test::start_worker(led[0], q4k, "", {"--device", "vulkan"});
    const std::string g_member = test::start_worker(led[1], q4k);
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root/" + g_leader + "," + g_member}), q4k_cpu);
    const std::string c_leader = test::start_worker(led[2], q4k);
    const std::string c_member = test::start_worker(led[3], q4k, "", {"--device", "vulkan"});
    EXPECT_EQ(test::greedy_tokens(q4k, {"--stages", "root/" + c_leader + "," + c_member}), q4k_cpu);
    // The root's rank holds every layer of its share on the device.
    const std::string p_rank = test::start_worker(hybrid[4], q4k);
    const std::string p_stage = test::start_worker(hybrid[5], q4k);
    const auto partial = test::run_process(test::tessera_cmd({"run", "-m", q4k, "-n", "2", "--stages",
                                                              "root," + p_rank + "/" + p_stage, "--device", "vulkan",
                                                              "--gpu-layers", "1"}),
                                           60);
    EXPECT_NE(partial.exit_code, 0);
    EXPECT_NE(partial.err.find("--gpu-layers 1: a tensor-parallel rank keeps all"), std::string::npos)
        << partial.err;

    EXPECT_EQ(final_estimate({"--device", "vulkan"}), final_estimate({}));
}

// A worker on a GPU tells the root its device, the device's memory and its
// measured speed; plan --auto lists it as a GPU node.
TEST(DeviceCli, AutoPlanSeesAWorkersGpu) {
    if (!has_vulkan()) GTEST_SKIP() << "no Vulkan device in this build";
    const std::string stories = test::stories260k();
    std::unique_ptr<test::BackgroundProcess> worker;
    const std::string address = test::start_worker(worker, stories, "", {"--device", "vulkan"});
    const auto r = test::run_process(
        test::tessera_cmd({"plan", "-m", stories, "--auto", "--workers", address, "--json"}), 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 2u) << r.out;
    EXPECT_EQ(j["nodes"][0]["device"], "cpu");
    EXPECT_EQ(j["nodes"][1]["device"].get<std::string>().rfind("vulkan:0 ", 0), 0u) << r.out;
    EXPECT_GT(j["nodes"][1]["probe_seconds"].get<double>(), 0.0);
    const auto devices = nlohmann::json::parse(test::run_process(test::tessera_cmd({"devices", "--json"}), 60).out);
    EXPECT_LE(j["nodes"][1]["free_memory"].get<uint64_t>(), devices["vulkan"][0]["device_local_bytes"].get<uint64_t>());
    // A run's plan names each rank's device: the root on its GPU, the worker on its own.
    std::unique_ptr<test::BackgroundProcess> rank;
    const std::string rank_address = test::start_worker(rank, stories, "", {"--device", "vulkan"});
    const auto run = test::run_process(
        test::tessera_cmd({"run", "-m", stories, "-n", "2", "--workers", rank_address, "--device", "vulkan", "--json"}),
        120);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto plan = nlohmann::json::parse(run.out)["plan"];
    ASSERT_EQ(plan.size(), 2u) << run.out;
    EXPECT_EQ(plan[0]["device"].get<std::string>().rfind("vulkan:0 (", 0), 0u) << plan.dump();
    EXPECT_EQ(plan[1]["device"].get<std::string>().rfind("vulkan:0 ", 0), 0u) << plan.dump();
}

TEST(DeviceCli, WhatTheGpuDoesNotRunYetIsRefusedByName) {
    if (!has_vulkan()) GTEST_SKIP() << "no Vulkan device in this build";
    const std::string stories = test::stories260k();
    auto r = test::run_process(test::tessera_cmd({"run", "-m", stories, "-n", "2", "--device", "vulkan:9"}), 60);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("there is no Vulkan device 9"), std::string::npos) << r.err;
    r = test::run_process(test::tessera_cmd({"run", "-m", stories, "-n", "2", "--device", "tpu"}), 60);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("the devices are cpu and vulkan[:N]"), std::string::npos) << r.err;
    r = test::run_process(test::tessera_cmd({"run", "-m", stories, "-n", "2", "--device", "vulkan", "-ngl", "-1"}), 60);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--gpu-layers -1: a count of layers, 0 or more"), std::string::npos) << r.err;
    r = test::run_process(
        test::tessera_cmd({"run", "-m", stories, "-n", "2", "--device", "vulkan", "--local", "2", "--prefill", "sp"}), 60);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("sequence-parallel prefill (--prefill sp) runs on CPUs for now"), std::string::npos) << r.err;
    // A worker on the GPU asked for a sequence-parallel chunk.
    std::unique_ptr<test::BackgroundProcess> worker;
    const std::string address = test::start_worker(worker, stories, "", {"--device", "vulkan"});
    r = test::run_process(
        test::tessera_cmd({"run", "-m", stories, "-n", "2", "--workers", address, "--prefill", "sp", "-p", "Once upon"}),
        60);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("pipeline stages and tensor-parallel ranks only"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
