// Tensor parallel end to end, with every rank a real process on a real TCP
// port: `run --local N` equals a single process token for token; a worker
// holding another model is refused with both fingerprints; a worker that
// dies or stalls mid-generation is reported by address and rank within 5 s.
#include "slow_model.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <thread>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;

const auto& cmd = test::tessera_cmd;

using test::tokens_of;

using test::start_worker;

std::string slow_model() { return test::write_slow_model(test::scratch_dir("tp_cli")); }

}  // namespace

TEST(TensorParallelCli, LocalRanksEqualOneProcess) {
    const auto single = run_process(cmd({"run", "-p", "Once upon a time", "-n", "48", "--temp", "0", "--json"}), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    for (const char* n : {"2", "3"}) {
        const auto tp = run_process(
            cmd({"run", "--local", n, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--json"}), 60);
        ASSERT_EQ(tp.exit_code, 0) << tp.err;
        EXPECT_EQ(tokens_of(tp), tokens_of(single)) << n << " processes";
        EXPECT_EQ(nlohmann::json::parse(tp.out)["mode"], "exact");
    }
    // Local ranks are equal processes on one machine: equal shares, not a
    // speed probe's noise (the worker serves the second half).
    const auto two = run_process(cmd({"run", "--local", "2", "-p", "Once", "-n", "2", "--temp", "0"}), 60);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_NE(two.err.find("KV heads [2, 4), FFN channels [96, 172), vocab rows [256, 512)"), std::string::npos)
        << two.err;
}

TEST(TensorParallelCli, WorkerWithAnotherModelIsRefused) {
    std::unique_ptr<BackgroundProcess> worker;
    const std::string address = start_worker(worker, slow_model());
    const auto r = run_process(cmd({"run", "--workers", address, "-p", "Once", "-n", "4"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("worker " + address + " (rank 1) holds a different model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

// A worker in a memory cgroup (v1, as on these machines) smaller than its
// share: the root refuses the plan, naming the rank, its address and the bytes.
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
        const auto r = run_process(
            cmd({"run", "-m", model, "--workers", address, "--weights", "1,1", "-n", "4", "-c", "64"}), 60);
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("plan refused: rank 1 (" + address + ") needs"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
    }
    ::rmdir(cgroup.c_str());
}

// SIGKILL (the connection closes) and SIGSTOP (the worker stalls: only the
// timeout can tell) a worker one second into a run of a few seconds.
TEST(TensorParallelCli, DeadOrStalledWorkerIsReportedWithinFiveSeconds) {
    const std::string model = slow_model();
    for (int sig : {SIGKILL, SIGSTOP}) {
        std::unique_ptr<BackgroundProcess> w1, w2;
        const std::string a1 = start_worker(w1, model);
        const std::string a2 = start_worker(w2, model);
        test::ProcessResult root;
        std::thread runner([&] {
            root = run_process(cmd({"run", "-m", model, "--workers", a1 + "," + a2, "-n", "3000", "-c", "3100",
                                    "--temp", "0", "-t", "1", "--json", "--recover-ms", "0"}),
                               60);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        const auto stopped = std::chrono::steady_clock::now();
        w2->signal(sig);
        runner.join();
        const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
        EXPECT_EQ(root.exit_code, 1) << "signal " << sig << ": " << root.err;
        EXPECT_LT(after, 6.0) << "signal " << sig;  // 5 s plus process exit
        EXPECT_NE(root.err.find("worker " + a2 + " (rank 2)"), std::string::npos) << root.err;
        if (sig == SIGSTOP) w2->signal(SIGCONT);
    }
}

}  // namespace tessera
