// Tensor parallel end to end, with every rank a real process on a real TCP
// port: `run --local N` equals a single process token for token; a worker
// holding another model is refused with both fingerprints; a worker that
// dies or stalls mid-generation is reported by address and rank within 5 s.
#include "slow_model.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include "ops/cpu_target.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <iterator>
#include <regex>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <thread>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;

using test::tokens_of;

using test::start_worker;

std::string slow_model() { return test::write_slow_model(test::scratch_dir("tp_cli")); }

}  // namespace

TEST(TensorParallelCli, LocalRanksEqualOneProcess) {
    const auto single =
        run_process(test::tessera_cmd({"run", "-p", "Once upon a time", "-n", "48", "--temp", "0", "--json"}), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    for (const char* n : {"2", "3"}) {
        const auto tp = run_process(
            test::tessera_cmd({"run", "--local", n, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--json"}),
            60);
        ASSERT_EQ(tp.exit_code, 0) << tp.err;
        EXPECT_EQ(tokens_of(tp), tokens_of(single)) << n << " processes";
        EXPECT_EQ(nlohmann::json::parse(tp.out)["mode"], "exact");
    }
    // Local ranks are equal processes on one machine: equal shares, not a
    // speed probe's noise (the worker serves the second half).
    const auto two =
        run_process(test::tessera_cmd({"run", "--local", "2", "-p", "Once", "-n", "2", "--temp", "0"}), 60);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_NE(two.err.find("KV heads [2, 4), FFN channels [96, 172), vocab rows [256, 512)"), std::string::npos)
        << two.err;
}

// The exact all-reduce with every rank a process: 2, 3 and 4 ranks (uneven
// shares too) write the same llama.cpp KL-divergence base file as a single
// process, byte for byte: every scored position's log-probabilities (their
// range as floats and 16-bit codes) over prompts of 128 positions in batches
// of 32, so a logit one ulp off would show. --fast (Q8_0 partials) gives
// another file, close to it.
TEST(TensorParallelCli, RanksAsProcessesGiveASingleProcessDistributions) {
    const std::string dir = test::scratch_dir("tp_cli_kl");
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const auto base = [&](const std::string& name, std::vector<std::string> extra) {
        std::vector<std::string> args =
            test::tessera_cmd({"perplexity", "-f", text, "-c", "128", "-b", "32", "--chunks", "3", "-t", "1",
                               "--kl-divergence-base", dir + "/" + name});
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_process(args, 120);
        EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
        std::ifstream in(dir + "/" + name, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string single = base("single.kld", {});
    ASSERT_GT(single.size(), 100000u);
    EXPECT_EQ(base("local2.kld", {"--local", "2"}), single);
    EXPECT_EQ(base("local3.kld", {"--local", "3", "--weights", "1,3,1"}), single);
    EXPECT_EQ(base("local4.kld", {"--local", "4"}), single);
    EXPECT_NE(base("local3fast.kld", {"--local", "3", "--fast"}), single);
    const auto kl = run_process(test::tessera_cmd({"perplexity", "--local", "3", "--fast", "-t", "1", "-b", "32",
                                                   "--kl-divergence", "--kl-divergence-base", dir + "/single.kld"}),
                                120);
    ASSERT_EQ(kl.exit_code, 0) << kl.err;
    const size_t at = kl.out.find("Mean    KLD:");
    ASSERT_NE(at, std::string::npos) << kl.out;
    EXPECT_LT(std::stod(kl.out.substr(at + 12)), 1e-2) << kl.out;
}

// Exact across CPU kinds (issue 25): a single node forced to each SIMD target
// this CPU runs, and one tensor-parallel run whose three ranks run three
// different targets (the best, AVX2, the portable fallback), write the
// same KL-divergence base file as the single node on its best target, byte
// for byte: F32 weights (attention, float dots, softmax, SiLU), Q4_0 and
// Q8_0 (grouped kernels; stories260K's narrow matrices stay F32), and Q4_K
// on a generated model wide enough for its super-blocks, and that model's
// Q4_K_M, Q5_K_M, IQ4_XS, IQ3_M and IQ2_M mixes.
TEST(TensorParallelCli, EveryCpuTargetAndAMixOfThemGiveOneNodesDistributions) {
    const std::string dir = test::scratch_dir("tp_cli_targets");
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::vector<std::string> targets = cpu_target_names();
    const std::string default_model = test::source_dir() + "/models/stories260K.gguf";
    ASSERT_GE(targets.size(), 2u);
    std::vector<std::pair<std::string, std::string>> models = {{"F32", default_model}};
    for (const char* type : {"Q4_0", "Q8_0"}) {
        const std::string out = dir + "/stories-" + type + ".gguf";
        const auto q = run_process(test::tessera_cmd({"quantize", default_model, out, type}), 60);
        ASSERT_EQ(q.exit_code, 0) << q.err;
        models.emplace_back(type, out);
    }
    const std::string wide = dir + "/wide-Q4_K.gguf";
    const auto g = run_process(
        test::tessera_cmd({"gen-model", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn",
                           "512", "--vocab-from", test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf", "--type",
                           "Q4_K", "-q", "-o", wide}),
        60);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    models.emplace_back("Q4_K", wide);
    // llama.cpp's mixes (Q6_K's rows beside Q4_K's groups, Q5_K, IQ4_XS) of the same shape.
    const std::string wide_f32 = dir + "/wide-F32.gguf";
    const auto f =
        run_process(test::tessera_cmd({"gen-model", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                                       "--ffn", "512", "--vocab-from",
                                       test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf", "-q", "-o", wide_f32}),
                    60);
    ASSERT_EQ(f.exit_code, 0) << f.err;
    // And the grid I-quants: IQ3_M's mix (IQ3_S, Q4_K) and, with the kept
    // importance matrix of a model of these matrix shapes, IQ2_M's (IQ2_S, IQ3_S).
    for (const char* mix : {"Q4_K_M", "Q5_K_M", "IQ4_XS", "IQ3_M", "IQ2_M"}) {
        const std::string out = dir + "/wide-" + mix + ".gguf";
        std::vector<std::string> args = test::tessera_cmd({"quantize", wide_f32, out, mix});
        if (std::string(mix) == "IQ2_M") {
            args.push_back("--imatrix");
            args.push_back(test::data_dir() + "/quant/imatrix-g4s.gguf");
        }
        const auto q = run_process(args, 60);
        ASSERT_EQ(q.exit_code, 0) << q.err;
        models.emplace_back(mix, out);
    }
    for (const auto& [type, model] : models) {
        const std::string model_path = model;
        const auto base = [&](const std::string& name, std::vector<std::string> pre, std::vector<std::string> extra) {
            std::vector<std::string> args = test::tessera_cmd({});
            args.insert(args.end(), pre.begin(), pre.end());
            for (const std::string& a : {std::string("perplexity"), std::string("-m"), model_path, std::string("-f"),
                                         text, std::string("-c"), std::string("128"), std::string("-b"),
                                         std::string("32"), std::string("--chunks"), std::string("2"),
                                         std::string("-t"), std::string("1"), std::string("--kl-divergence-base"),
                                         dir + "/" + name}) {
                args.push_back(a);
            }
            args.insert(args.end(), extra.begin(), extra.end());
            const auto r = run_process(args, 120);
            EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
            std::ifstream in(dir + "/" + name, std::ios::binary);
            return std::string(std::istreambuf_iterator<char>(in), {});
        };
        const std::string single = base(type + ".best.kld", {}, {});
        ASSERT_GT(single.size(), 10000u) << type;
        for (const std::string& target : targets) {
            // (EXPECT_TRUE: a binary file's bytes make no readable message.)
            EXPECT_TRUE(base(type + "." + target + ".kld", {"--cpu-target", target}, {}) == single)
                << type << " on " << target;
        }
        // Root on the best target, workers on AVX2 (or the next target where
        // there is none) and on the portable fallback.
        const bool has_avx2 = std::find(targets.begin(), targets.end(), "AVX2") != targets.end();
        const std::string second = has_avx2 && targets[0] != "AVX2" ? "AVX2" : targets[1];
        std::unique_ptr<BackgroundProcess> w1, w2;
        const std::string a1 = start_worker(w1, model_path, second);
        const std::string a2 = start_worker(w2, model_path, "portable");
        EXPECT_TRUE(base(type + ".mixed.kld", {}, {"--workers", a1 + "," + a2}) == single)
            << type << ": ranks on " << targets[0] << ", " << second << " and the portable fallback";
    }
}

TEST(TensorParallelCli, WorkerWithAnotherModelIsRefused) {
    std::unique_ptr<BackgroundProcess> worker;
    const std::string address = start_worker(worker, slow_model());
    const auto r = run_process(test::tessera_cmd({"run", "--workers", address, "-p", "Once", "-n", "4"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("worker " + address + " (rank 1) holds a different model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

// A worker in a memory cgroup (v1, as on these machines) smaller than its
// share: with --no-offload the root refuses the plan, naming the rank, its
// address and the bytes (without it the worker would stream what it cannot
// hold: tests/apps/test_pipeline_memory.cpp).
TEST(TensorParallelCli, PlanThatDoesNotFitAWorkerIsRefused) {
#if defined(__SANITIZE_ADDRESS__)
    // ASan's shadow memory and the shared libraries (OpenSSL for serve) put a
    // sanitizer build's baseline above the 48 MiB this test gives a worker.
    GTEST_SKIP() << "a sanitizer build cannot start inside the 48 MiB cgroup this test needs";
#endif
    const std::string cgroup = "/sys/fs/cgroup/memory/tessera-test-" + std::to_string(::getpid());
    if (::geteuid() != 0 || ::mkdir(cgroup.c_str(), 0755) != 0) {
        GTEST_SKIP() << "needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory";
    }
    {
        std::ofstream(cgroup + "/memory.limit_in_bytes") << (48 << 20);
    }
    const std::string model = slow_model();  // 108 MB of F32 weights: a half share is ~54 MB
    {
        std::unique_ptr<BackgroundProcess> worker = std::make_unique<BackgroundProcess>(std::vector<std::string>{
            "/bin/sh", "-c",
            "echo $$ > " + cgroup + "/cgroup.procs && exec " + test::tessera_binary() +
                " worker --listen 127.0.0.1:0 -t 1 --once -m " + model});
        const std::string line = worker->read_line(30);
        const std::string prefix = "listening on port ";
        ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
        const std::string address = "127.0.0.1:" + line.substr(prefix.size());
        const auto r = run_process(test::tessera_cmd({"run", "-m", model, "--workers", address, "--weights", "1,1",
                                                      "-n", "4", "-c", "64", "--no-offload"}),
                                   60);
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("plan refused: rank 1 (" + address + ") needs"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
    }
    ::rmdir(cgroup.c_str());
}

// SIGKILL (the connection closes) and SIGSTOP (the worker stalls: only the
// timeout can tell) a worker one second into a run of a few seconds. The
// ranks exchange partials directly: the other worker waits for the lost one
// too, and the root still names the lost one, whichever rank it was.
TEST(TensorParallelCli, DeadOrStalledWorkerIsReportedWithinFiveSeconds) {
    const std::string model = slow_model();
    struct Case {
        int sig, lost;
        const char* exchange;
    };
    // The reduce-scatter's two phases wait on peers the same way: a lost
    // rank is named there too.
    for (const Case& c :
         {Case{SIGKILL, 2, "all-to-all"}, Case{SIGSTOP, 2, "all-to-all"}, Case{SIGKILL, 1, "all-to-all"},
          Case{SIGSTOP, 1, "all-to-all"}, Case{SIGKILL, 2, "reduce-scatter"}, Case{SIGSTOP, 1, "reduce-scatter"}}) {
        // Plain names, not a structured binding: clang 14 cannot capture a
        // binding in the lambda below.
        const int sig = c.sig, lost = c.lost;
        const std::string exchange = c.exchange;
        std::unique_ptr<BackgroundProcess> w1, w2;
        const std::string a1 = start_worker(w1, model);
        const std::string a2 = start_worker(w2, model);
        test::ProcessResult root;
        std::thread runner([&] {
            root = run_process(
                test::tessera_cmd({"run", "-m", model, "--workers", a1 + "," + a2, "-n", "3000", "-c", "3100", "--temp",
                                   "0", "-t", "1", "--json", "--recover-ms", "0", "--exchange", exchange}),
                60);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        const auto stopped = std::chrono::steady_clock::now();
        BackgroundProcess& victim = lost == 1 ? *w1 : *w2;
        victim.signal(sig);
        runner.join();
        const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
        EXPECT_EQ(root.exit_code, 1) << "signal " << sig << ", " << exchange << ": " << root.err;
        // The stall deadline is 5 s of I/O timeout plus a row budget sized
        // from the workers' measured speed (a few hundred ms in a Release
        // build, about a second under ASan on a loaded host). A stall is
        // reported within that deadline, which the message names, plus one
        // second for the process to exit; the deadline itself stays bounded.
        double deadline = 5.0;
        const std::regex named_deadline("for ([0-9]+) ms");
        for (auto it = std::sregex_iterator(root.err.begin(), root.err.end(), named_deadline);
             it != std::sregex_iterator(); ++it) {
            deadline = std::max(deadline, std::stod((*it)[1].str()) / 1e3);
        }
        EXPECT_LT(deadline, 8.0) << "signal " << sig << ", " << exchange << ": " << root.err;
        EXPECT_LT(after, deadline + 1.0) << "signal " << sig << ", " << exchange << ": " << root.err;
        const std::string name = "worker " + (lost == 1 ? a1 : a2) + " (rank " + std::to_string(lost) + ")";
        EXPECT_NE(root.err.find(name), std::string::npos) << "signal " << sig << ", " << exchange << ": " << root.err;
        if (sig == SIGSTOP) victim.signal(SIGCONT);
    }
}

}  // namespace tessera
