// Tensor parallel across "hosts": the root and two workers each in their own
// Linux network namespace, joined by veth pairs limited to 100 Mbit/s (tc tbf)
// with 1 ms of round trip added by tessera-relay (no netem on this kernel) on
// every link, worker to worker too.
// Greedy output must equal a single process's. Needs root (CI runs as root);
// skipped with a message otherwise. Only these namespaces are ever targets.
#include "subprocess.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;

std::string cluster_script() { return test::source_dir() + "/tools/netns_cluster.sh"; }

class Namespaces {
public:
    Namespaces(const std::string& name, int n, int subnet, int rate_mbit) : name_(name), n_(n) {
        const std::string up = cluster_script() + " up " + name + " " + std::to_string(n) + " " +
                               std::to_string(subnet) + " " + std::to_string(rate_mbit);
        ok_ = std::system(up.c_str()) == 0;
    }
    ~Namespaces() {
        const std::string down = cluster_script() + " down " + name_ + " " + std::to_string(n_);
        [[maybe_unused]] const int rc = std::system(down.c_str());
    }
    bool ok() const { return ok_; }

private:
    std::string name_;
    int n_;
    bool ok_ = false;
};

std::string first_line_port(BackgroundProcess& p) {
    const std::string line = p.read_line(30);
    const std::string prefix = "listening on port ";
    return line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : "";
}

}  // namespace

TEST(NetworkNamespaces, TensorParallelAcrossNamespacesEqualsOneProcess) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    const std::string name = "tsn" + std::to_string(::getpid() % 100000);
    const int subnet = 100 + ::getpid() % 100;
    Namespaces ns(name, 2, subnet, 100);
    ASSERT_TRUE(ns.ok()) << "could not create network namespaces (ip netns, veth, tc tbf)";

    // Workers on a non-loopback address need the key (or --insecure).
    const std::string key = test::scratch_dir("netns") + "/key";
    std::remove(key.c_str());
    ASSERT_EQ(run_process({test::tessera_binary(), "keygen", "-o", key}, 30).exit_code, 0);
    std::vector<std::unique_ptr<BackgroundProcess>> procs;
    std::string workers;
    for (int i = 1; i <= 2; ++i) {
        const std::string ip = "10." + std::to_string(subnet) + "." + std::to_string(i) + ".2";
        procs.push_back(std::make_unique<BackgroundProcess>(std::vector<std::string>{
            "/usr/sbin/ip", "netns", "exec", name + "-w" + std::to_string(i), test::tessera_binary(), "worker",
            "--listen", ip + ":7000", "-t", "1", "--once", "--key", key}));
        ASSERT_EQ(first_line_port(*procs.back()), "7000");
        // The relay lives in the worker's namespace, in front of its port,
        // and adds 0.5 ms each way to every connection to it: the root's and
        // the other worker's (the ranks exchange partials directly).
        procs.push_back(std::make_unique<BackgroundProcess>(
            std::vector<std::string>{"/usr/sbin/ip", "netns", "exec", name + "-w" + std::to_string(i),
                                     test::relay_binary(), "--listen", ip + ":7001", "--target", ip + ":7000",
                                     "--delay-ms", "0.5"}));
        ASSERT_EQ(first_line_port(*procs.back()), "7001");
        if (!workers.empty()) workers += ',';
        workers += ip + ":7001";
    }
    const auto tp = run_process({"/usr/sbin/ip", "netns", "exec", name + "-r", test::tessera_binary(), "run",
                                 "--workers", workers, "-p", "Once upon a time", "-n", "32", "--temp", "0", "-t",
                                 "1", "--json", "--key", key},
                                120);
    ASSERT_EQ(tp.exit_code, 0) << tp.err;
    const auto single = run_process({test::tessera_binary(), "run", "-p", "Once upon a time", "-n", "32", "--temp",
                                     "0", "--json"},
                                    60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    EXPECT_EQ(nlohmann::json::parse(tp.out)["tokens"], nlohmann::json::parse(single.out)["tokens"]);
    EXPECT_EQ(nlohmann::json::parse(tp.out)["ranks"], 3);
}

}  // namespace tessera
