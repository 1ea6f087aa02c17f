// A model larger than any one process may hold runs as a pipeline: each
// process in its own memory cgroup (v1, as on these machines) limited to 40%
// of the model's weights, three stages run it with greedy output equal to an
// unlimited single process, while a single process under the same limit is
// refused by the planner with --no-offload and otherwise streams the layers
// it cannot hold from disk, with the same output; each stage's peak resident
// memory stays near its share of the weights and under the limit; and a stage
// limited to half its share streams too, with the same output.
#include "model/llama_model.h"
#include "memory_cgroup.h"
#include "model/random_model.h"
#include "subprocess.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::MemoryCgroup;
using test::run_process;

// "peak resident memory X MiB; slice Y MiB of weights" from a worker's log.
std::pair<double, double> worker_peak_and_share(const std::string& log) {
    const size_t at = log.find("peak resident memory ");
    if (at == std::string::npos) return {-1, -1};
    double peak = -1, share = -1;
    std::sscanf(log.c_str() + at, "peak resident memory %lf MiB; slice %lf MiB", &peak, &share);
    return {peak, share};
}

}  // namespace

TEST(PipelineMemory, ThreeStagesRunAModelTwoAndAHalfTimesTheLimitThatRefusesOneProcess) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "sanitizer builds use several times the memory: resident sizes mean nothing here";
#endif
    if (!MemoryCgroup::available()) {
        GTEST_SKIP() << "needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory";
    }
    const std::string dir = test::scratch_dir("pipeline_memory");
    const std::string model_path = dir + "/model.gguf";
    RandomModelSpec spec;
    spec.n_embd = 512;
    // Large enough that a process's fixed resident memory (code, shared
    // libraries such as OpenSSL for serve, threads; ~15 MiB) stays well inside
    // the limit's margin over a stage's share.
    spec.n_layer = 30;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = 1536;
    spec.n_vocab = 1000;
    spec.n_ctx = 256;
    spec.type = QuantType::F32;
    write_random_model(spec, model_path);
    {
        // Drop the file's pages from the page cache, so each stage faults in
        // (and is charged for) what it reads itself.
        const int fd = ::open(model_path.c_str(), O_RDONLY);
        ASSERT_GE(fd, 0);
        ::fsync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
    uint64_t weight_bytes = 0;
    {
        const LlamaModel model(model_path);
        for (const auto& t : model.file().tensors()) weight_bytes += t.n_bytes;
    }
    const uint64_t limit = weight_bytes * 2 / 5;  // the model is 2.5 x the limit
    const std::string tag = std::to_string(::getpid());
    MemoryCgroup root_cg("tessera-pipe-r-" + tag, limit), cg1("tessera-pipe-1-" + tag, limit),
        cg2("tessera-pipe-2-" + tag, limit);
    ASSERT_TRUE(root_cg.ok() && cg1.ok() && cg2.ok()) << "cannot create memory cgroups";
    const std::string bin = test::tessera_binary();
    const std::vector<std::string> gen = {"-m", model_path, "-p", "", "-n", "12", "-c", "256", "--temp", "0", "-t", "1",
                                          "-b", "32", "--json"};
    auto with = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
    };

    // One process, unlimited: the reference output.
    const auto single = run_process(with({bin, "run"}, gen), 120);
    ASSERT_EQ(single.exit_code, 0) << single.err;

    // One process under the limit with --no-offload: refused by the
    // planner, naming the bytes.
    const auto refused = run_process(root_cg.wrap(with({bin, "run", "--no-offload"}, gen)), 120);
    EXPECT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_NE(refused.err.find("plan refused: this process needs"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("--no-offload: it could run streaming"), std::string::npos) << refused.err;

    // Without it, the same process keeps what fits and streams the rest of
    // its layers from disk: the same tokens.
    const auto streaming = run_process(root_cg.wrap(with({bin, "run"}, gen)), 240);
    ASSERT_EQ(streaming.exit_code, 0) << streaming.err;
    EXPECT_GT(nlohmann::json::parse(streaming.out)["plan"][0]["streamed_mib_per_token"].get<double>(), 0.0);
    EXPECT_EQ(nlohmann::json::parse(streaming.out)["tokens"], nlohmann::json::parse(single.out)["tokens"]);

    // Three stages, each process under the limit.
    std::unique_ptr<BackgroundProcess> w1, w2;
    std::string addresses[2];
    for (int i = 0; i < 2; ++i) {
        auto& w = i == 0 ? w1 : w2;
        const MemoryCgroup& cg = i == 0 ? cg1 : cg2;
        w = std::make_unique<BackgroundProcess>(
            cg.wrap({bin, "worker", "--listen", "127.0.0.1:0", "-m", model_path, "-t", "1", "--once"},
                    dir + "/w" + std::to_string(i + 1) + ".log"));
        const std::string line = w->read_line(30);
        ASSERT_EQ(line.rfind("listening on port ", 0), 0u) << line;
        addresses[i] = "127.0.0.1:" + line.substr(18);
    }
    const std::string stages = "root/" + addresses[0] + "/" + addresses[1];
    const auto staged =
        run_process(root_cg.wrap(with({bin, "run", "--stages", stages, "--stage-layers", "10,10,10"}, gen)), 120);
    ASSERT_EQ(staged.exit_code, 0) << staged.err;
    const auto out = nlohmann::json::parse(staged.out);
    EXPECT_EQ(out["tokens"], nlohmann::json::parse(single.out)["tokens"]);
    // The workers have served their one session: they log their peak memory
    // and exit by themselves (killing them now could cut that line off).
    EXPECT_EQ(w1->wait_exit(30), 0);
    EXPECT_EQ(w2->wait_exit(30), 0);
    w1.reset();
    w2.reset();

    const double staged_tps = out["timings"]["generation_tokens_per_second"].get<double>();

    // The same plan with the last stage limited to half its share: it
    // streams its later layers from disk, and the tokens are the same.
    {
        MemoryCgroup half("tessera-pipe-h-" + tag, weight_bytes / 6);
        ASSERT_TRUE(half.ok());
        std::unique_ptr<BackgroundProcess> a, b;
        a = std::make_unique<BackgroundProcess>(
            cg1.wrap({bin, "worker", "--listen", "127.0.0.1:0", "-m", model_path, "-t", "1", "--once"},
                     dir + "/h1.log"));
        b = std::make_unique<BackgroundProcess>(
            half.wrap({bin, "worker", "--listen", "127.0.0.1:0", "-m", model_path, "-t", "1", "--once"},
                      dir + "/h2.log"));
        std::string at[2];
        for (int i = 0; i < 2; ++i) {
            const std::string line = (i == 0 ? a : b)->read_line(30);
            ASSERT_EQ(line.rfind("listening on port ", 0), 0u) << line;
            at[i] = "127.0.0.1:" + line.substr(18);
        }
        const auto limited = run_process(
            root_cg.wrap(with({bin, "run", "--stages", "root/" + at[0] + "/" + at[1], "--stage-layers", "10,10,10"}, gen)),
            240);
        ASSERT_EQ(limited.exit_code, 0) << limited.err;
        const auto got = nlohmann::json::parse(limited.out);
        // The plan says which stage streams (an estimate of its bytes per token).
        EXPECT_EQ(got["plan"][0]["streamed_mib_per_token"], 0.0) << got["plan"].dump();
        EXPECT_EQ(got["plan"][1]["streamed_mib_per_token"], 0.0) << got["plan"].dump();
        EXPECT_GT(got["plan"][2]["streamed_mib_per_token"].get<double>(), 0.0) << got["plan"].dump();
        EXPECT_EQ(got["tokens"], nlohmann::json::parse(single.out)["tokens"]);
        EXPECT_EQ(a->wait_exit(30), 0);
        EXPECT_EQ(b->wait_exit(30), 0);
        const std::string log = test::read_text(dir + "/h2.log");
        EXPECT_NE(log.find("streaming "), std::string::npos) << log;
        // Not a test of speed (times are noise here): what streaming cost on this run.
        std::fprintf(stderr, "3 stages, last stage limited to half its share: %.2f tok/s against %.2f unlimited (%.2fx)\n",
                     got["timings"]["generation_tokens_per_second"].get<double>(), staged_tps,
                     got["timings"]["generation_tokens_per_second"].get<double>() / staged_tps);
    }

    // Peak resident memory per stage: under the limit, near its share.
    const double mib = 1048576.0;
    const double share = weight_bytes / 3.0 / mib;
    const double root_peak = out["peak_resident_bytes"].get<double>() / mib;
    std::fprintf(stderr, "model %.1f MiB of weights, limit %.1f MiB per process, share ~%.1f MiB\n",
                 weight_bytes / mib, limit / mib, share);
    std::fprintf(stderr, "stage 0 (root): peak %.1f MiB\n", root_peak);
    EXPECT_LT(root_peak, limit / mib);
    EXPECT_GT(root_peak, 0.8 * share);
    for (int i = 0; i < 2; ++i) {
        const std::string log = test::read_text(dir + "/w" + std::to_string(i + 1) + ".log");
        const auto [peak, slice] = worker_peak_and_share(log);
        std::fprintf(stderr, "stage %d: peak %.1f MiB for a slice of %.1f MiB\n", i + 1, peak, slice);
        ASSERT_GT(peak, 0) << log;
        EXPECT_LT(peak, limit / mib) << log;
        EXPECT_GT(peak, 0.8 * slice) << log;
        EXPECT_LT(peak, slice + 24.0) << log;  // the rest: code, threads, scratch, KV cache
    }
}

}  // namespace tessera
