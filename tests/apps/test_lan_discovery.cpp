// A home lab that assembles itself (issue: home-lab operations), on one
// Ethernet segment of network namespaces (tools/netns_lan.sh: a bridge and
// six hosts; only these namespaces are ever targets): keyed discovery finds
// the workers holding the cluster's key and no others, finds a worker
// restarted mid-search, survives a flood of junk, forged, stale and replayed
// packets (counted, and the worker still serves), `status --json` lists what
// each worker holds, and a root cut off mid-session (its cable pulled: no FIN,
// no RST) leaves the worker free for another root within the silence bound.
// Needs root (CI runs as root); skipped with a message otherwise.
#include "cluster/session/session_messages.h"
#include "hostile_peer.h"
#include "net/discovery_gate.h"
#include "net/discovery_packets.h"
#include "net/wire_key.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace tessera {
namespace {

using test::BackgroundProcess;
using test::run_process;

std::string lan_script() { return test::source_dir() + "/tools/netns_lan.sh"; }

class Lan {
public:
    Lan(int n) : name_("tl" + std::to_string(::getpid() % 100000)), n_(n), subnet_(100 + ::getpid() % 100) {
        ok_ = std::system((lan_script() + " up " + name_ + " " + std::to_string(n) + " " + std::to_string(subnet_)).c_str()) == 0;
    }
    ~Lan() { [[maybe_unused]] const int rc = std::system((lan_script() + " down " + name_ + " " + std::to_string(n_)).c_str()); }
    bool ok() const { return ok_; }
    std::string ns(int host) const { return name_ + "-h" + std::to_string(host); }
    std::string ip(int host) const { return "10." + std::to_string(subnet_) + ".0." + std::to_string(host); }
    bool cut(int host) const { return std::system((lan_script() + " cut " + name_ + " " + std::to_string(host)).c_str()) == 0; }

private:
    std::string name_;
    int n_, subnet_;
    bool ok_ = false;
};

// `tessera ARGS` run in a host's namespace.
test::ProcessResult in_host(const Lan& lan, int host, const std::vector<std::string>& args, int timeout_s = 120) {
    std::vector<std::string> argv = {"/usr/sbin/ip", "netns", "exec", lan.ns(host), test::tessera_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, timeout_s);
}

// A worker in a host's namespace on port 7000 (0.0.0.0 unless args give
// --listen), its stderr in a log file.
class LanWorker {
public:
    LanWorker(const Lan& lan, int host, const std::vector<std::string>& args, const std::string& log)
        : log_(log) {
        const bool listen_given = std::find(args.begin(), args.end(), "--listen") != args.end();
        std::string command = "exec /usr/sbin/ip netns exec " + lan.ns(host) + " " + test::tessera_binary() +
                              " worker -t 1" + (listen_given ? "" : " --listen 0.0.0.0:7000");
        for (const std::string& a : args) command += " '" + a + "'";
        command += " 2> '" + log + "'";
        process_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{"/bin/sh", "-c", command});
        started_ = process_->read_line(30) == "listening on port 7000";
    }
    bool started() const { return started_; }
    std::string log() const {
        std::ifstream in(log_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    void stop() { process_.reset(); }

private:
    std::string log_;
    std::unique_ptr<BackgroundProcess> process_;
    bool started_ = false;
};

std::string lan_discovery_dir() { return test::test_dir("lan_discovery"); }

std::string key_file(const std::string& name) {
    const std::string path = test::test_dir("lan_discovery") + "/" + name;
    std::remove(path.c_str());
    EXPECT_EQ(run_process({test::tessera_binary(), "keygen", "-o", path}, 30).exit_code, 0);
    return path;
}

// The addresses of "discovered N workers ...: A (name, ms), B (...)".
std::vector<std::string> discovered(const std::string& err) {
    std::vector<std::string> out;
    const size_t at = err.find("discovered ");
    if (at == std::string::npos) return out;
    const std::string line = err.substr(at, err.find('\n', at) - at);
    const std::regex address(R"((\d+\.\d+\.\d+\.\d+:\d+) \()");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), address); it != std::sregex_iterator(); ++it) {
        out.push_back((*it)[1]);
    }
    return out;
}

// Sends datagrams from inside a host's namespace (a thread of this process
// that entered it: sockets it opens belong to that namespace).
void send_from(const Lan& lan, int host, const std::string& to_ip, uint16_t to_port,
               const std::vector<std::vector<uint8_t>>& packets) {
    std::thread([&] {
        const int netns = ::open(("/run/netns/" + lan.ns(host)).c_str(), O_RDONLY | O_CLOEXEC);
        ASSERT_GE(netns, 0);
        ASSERT_EQ(::setns(netns, CLONE_NEWNET), 0);
        ::close(netns);
        const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(fd, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(to_port);
        ::inet_pton(AF_INET, to_ip.c_str(), &a.sin_addr);
        for (size_t i = 0; i < packets.size(); ++i) {
            ::sendto(fd, packets[i].data(), packets[i].size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
            if (i % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the socket buffer drains
        }
        ::close(fd);
    }).join();
}

TEST(LanDiscovery, FindsTheKeyedWorkersOnlyAndStatusListsWhatEachHolds) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    Lan lan(6);
    ASSERT_TRUE(lan.ok()) << "could not create network namespaces (ip netns, veth, bridge)";
    const std::string key = key_file("key"), other = key_file("other");
    const std::string model = test::default_model();
    // h1: the root; h2-h4 keyed workers (h4 without a model file: its
    // slices come from roots); h5 another cluster's; h6 keyless.
    std::vector<std::unique_ptr<LanWorker>> workers;
    for (int h = 2; h <= 4; ++h) {
        std::vector<std::string> args = {"--key", key, "--advertise"};
        if (h != 4) args.insert(args.end(), {"-m", model});
        if (h == 4) args.insert(args.end(), {"--cache-dir", lan_discovery_dir() + "/cache4"});
        workers.push_back(
            std::make_unique<LanWorker>(lan, h, args, lan_discovery_dir() + "/h" + std::to_string(h) + ".log"));
    }
    workers.push_back(std::make_unique<LanWorker>(
        lan, 5, std::vector<std::string>{"--key", other, "--advertise", "-m", model}, lan_discovery_dir() + "/h5.log"));
    workers.push_back(std::make_unique<LanWorker>(lan, 6, std::vector<std::string>{"--insecure", "-m", model},
                                                  lan_discovery_dir() + "/h6.log"));
    for (const auto& w : workers) ASSERT_TRUE(w->started()) << w->log();
    // Keyless workers never advertise.
    const test::ProcessResult keyless = in_host(lan, 6, {"worker", "--advertise", "--insecure", "--listen", "0.0.0.0:7001"});
    EXPECT_EQ(keyless.exit_code, 1);
    EXPECT_NE(keyless.err.find("--advertise needs the cluster's key"), std::string::npos) << keyless.err;

    const test::ProcessResult plan = in_host(lan, 1, {"plan", "-m", model, "--discover", "--key", key});
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    const std::vector<std::string> want = {lan.ip(2) + ":7000", lan.ip(3) + ":7000", lan.ip(4) + ":7000"};
    EXPECT_EQ(discovered(plan.err), want) << plan.err;
    EXPECT_NE(plan.out.find("chosen:"), std::string::npos) << plan.out;
    // A run plans over them and generates.
    const test::ProcessResult run = in_host(lan, 1, {"run", "-m", model, "--discover", "--key", key, "-p",
                                                     "Once upon a time", "-n", "8", "--temp", "0", "-t", "1"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(discovered(run.err), want) << run.err;
    // Another key finds only its own worker; no key is an error that says why.
    const test::ProcessResult theirs = in_host(lan, 1, {"plan", "-m", model, "--discover", "--key", other});
    EXPECT_EQ(discovered(theirs.err), std::vector<std::string>{lan.ip(5) + ":7000"}) << theirs.err;
    const test::ProcessResult nokey = in_host(lan, 1, {"plan", "-m", model, "--discover"});
    EXPECT_EQ(nokey.exit_code, 1);
    EXPECT_NE(nokey.err.find("--discover needs the cluster's key"), std::string::npos) << nokey.err;

    // A root that runs on h4 sends it its slice, which h4 keeps.
    const test::ProcessResult on_h4 = in_host(lan, 1, {"run", "-m", model, "--workers", lan.ip(4) + ":7000", "--key", key,
                                                       "-p", "Once upon a time", "-n", "4", "--temp", "0", "-t", "1"});
    EXPECT_EQ(on_h4.exit_code, 0) << on_h4.err;
    // status --json: what each holds (h4: the slice a root sent it).
    const test::ProcessResult status = in_host(lan, 1, {"status", "--discover", "--key", key, "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    const nlohmann::json all = nlohmann::json::parse(status.out);
    ASSERT_EQ(all.size(), 3u) << status.out;
    const std::string fingerprint = test::default_fingerprint();
    for (const nlohmann::json& w : all) {
        SCOPED_TRACE(w.dump());
        EXPECT_EQ(w["protocol"], kProtocolVersion);
        EXPECT_TRUE(w["keyed"].get<bool>());
        EXPECT_GE(w["discovery"]["answered"].get<int>(), 1);
        EXPECT_GT(w["link_round_trip_ms"].get<double>(), 0.0);
        EXPECT_TRUE(w["session"].is_null());
        bool holds = false;
        for (const nlohmann::json& m : w["models"]) holds = holds || m["fingerprint"] == fingerprint;
        EXPECT_TRUE(holds) << "every worker holds the model or slices of it";
    }
    EXPECT_EQ(all[2]["models"][0]["kind"], "cached slice");
    EXPECT_EQ(all[0]["models"][0]["kind"], "model file");
    EXPECT_EQ(all[0]["models"][0]["name"], "stories260K.gguf");
}

// A host with IPv6 alone (its IPv4 address removed): found by link-local
// multicast, and a root reaches it at its link-local address through its own
// interface (fe80::...%if), runs a tensor-parallel plan over it and gets one
// process's tokens.
TEST(LanDiscovery, AWorkerWithIPv6AloneIsFoundAndServes) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    Lan lan(2);
    ASSERT_TRUE(lan.ok()) << "could not create network namespaces (ip netns, veth, bridge)";
    ASSERT_EQ(std::system(("/usr/sbin/ip -n " + lan.ns(2) + " -4 addr flush scope global").c_str()), 0);
    const std::string key = key_file("v6_key"), model = test::default_model();
    LanWorker worker(lan, 2, {"--key", key, "--advertise", "-m", model, "--listen", "[::]:7000"},
                     lan_discovery_dir() + "/v6.log");
    ASSERT_TRUE(worker.started()) << worker.log();
    const std::vector<std::string> prompt = {"-p", "Once upon a time", "-n", "12", "--temp", "0", "-t", "1"};
    std::vector<std::string> args = {"run", "-m", model, "--discover", "--key", key};
    args.insert(args.end(), prompt.begin(), prompt.end());
    const test::ProcessResult found = in_host(lan, 1, args);
    ASSERT_EQ(found.exit_code, 0) << found.err << worker.log();
    const std::regex v6(R"(discovered 1 worker holding this cluster's key: \[(fe80::[0-9a-f:]+%[a-z0-9]+)\]:7000)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(found.err, m, v6)) << found.err;
    const std::string address = "[" + m[1].str() + "]:7000";
    std::vector<std::string> tp = {"run", "-m", model, "--workers", address, "--key", key, "--exact"};
    tp.insert(tp.end(), prompt.begin(), prompt.end());
    const test::ProcessResult over_v6 = in_host(lan, 1, tp);
    ASSERT_EQ(over_v6.exit_code, 0) << over_v6.err;
    std::vector<std::string> one = {"run", "-m", model};
    one.insert(one.end(), prompt.begin(), prompt.end());
    const test::ProcessResult alone = in_host(lan, 1, one);
    EXPECT_EQ(over_v6.out, alone.out);
    EXPECT_NE(over_v6.err.find("rank 1 " + address), std::string::npos) << over_v6.err;
}

// A worker down when the search begins and started again during it is found.
TEST(LanDiscovery, AWorkerRestartedMidSearchIsFound) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    Lan lan(3);
    ASSERT_TRUE(lan.ok()) << "could not create network namespaces (ip netns, veth, bridge)";
    const std::string key = key_file("restart_key"), model = test::default_model();
    const std::vector<std::string> args = {"--key", key, "--advertise", "-m", model};
    LanWorker steady(lan, 2, args, lan_discovery_dir() + "/steady.log");
    auto restarted = std::make_unique<LanWorker>(lan, 3, args, lan_discovery_dir() + "/restarted.log");
    ASSERT_TRUE(steady.started() && restarted->started());
    restarted->stop();
    test::ProcessResult plan;
    std::thread search([&] { plan = in_host(lan, 1, {"plan", "-m", model, "--discover", "--discover-ms", "4000", "--key", key}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    restarted = std::make_unique<LanWorker>(lan, 3, args, lan_discovery_dir() + "/restarted2.log");
    search.join();
    ASSERT_TRUE(restarted->started()) << restarted->log();
    EXPECT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_EQ(discovered(plan.err), (std::vector<std::string>{lan.ip(2) + ":7000", lan.ip(3) + ":7000"})) << plan.err;
}

// Junk, oversized datagrams, probes of another key, stale probes and a
// recorded probe replayed: each dropped and counted by reason (status), and
// the worker still answers discovery and serves a root.
TEST(LanDiscovery, AFloodOfBadPacketsIsCountedAndTheWorkerServesOn) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    Lan lan(2);
    ASSERT_TRUE(lan.ok()) << "could not create network namespaces (ip netns, veth, bridge)";
    const std::string key = key_file("flood_key"), model = test::default_model();
    LanWorker worker(lan, 2, {"--key", key, "--advertise", "-m", model}, lan_discovery_dir() + "/flood.log");
    ASSERT_TRUE(worker.started()) << worker.log();
    const DiscoveryKeys ours = discovery_keys(read_key_file(key));
    WireKey stranger_key;
    stranger_key.bytes.fill(0x5a);
    const DiscoveryKeys theirs = discovery_keys(stranger_key);
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    std::vector<std::vector<uint8_t>> junk, big, forged, stale;
    uint32_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> p(1 + i % 200);
        for (uint8_t& b : p) b = static_cast<uint8_t>(x = x * 1664525u + 1013904223u);
        junk.push_back(p);
    }
    for (int i = 0; i < 200; ++i) big.push_back(std::vector<uint8_t>(1000 + i, 0x41));
    for (int i = 0; i < 200; ++i) forged.push_back(seal_probe(theirs, {random_discovery_id(), now_ms}));
    for (int i = 0; i < 100; ++i) stale.push_back(seal_probe(ours, {random_discovery_id(), now_ms - 3600000}));
    const std::vector<uint8_t> recorded = seal_probe(ours, {random_discovery_id(), now_ms});
    const std::string to = lan.ip(2);
    send_from(lan, 1, to, 9999, junk);
    send_from(lan, 1, to, 9999, big);
    send_from(lan, 1, to, 9999, forged);
    send_from(lan, 1, to, 9999, stale);
    send_from(lan, 1, to, 9999, {recorded});  // answered once
    std::this_thread::sleep_for(std::chrono::milliseconds(kDuplicateMs + 500));
    send_from(lan, 1, to, 9999, std::vector<std::vector<uint8_t>>(300, recorded));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));

    const test::ProcessResult status = in_host(lan, 1, {"status", "--workers", to + ":7000", "--key", key, "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    const nlohmann::json d = nlohmann::json::parse(status.out)[0]["discovery"];
    SCOPED_TRACE(d.dump());
    // UDP on one veth does not lose datagrams at this pace; the bounds allow
    // for a few nonetheless.
    EXPECT_GE(d["dropped"]["malformed"].get<int>(), 1900);
    EXPECT_GE(d["dropped"]["oversized"].get<int>(), 190);
    EXPECT_GE(d["dropped"]["unauthenticated"].get<int>(), 190);
    EXPECT_GE(d["dropped"]["stale"].get<int>(), 95);
    EXPECT_GE(d["dropped"]["replayed"].get<int>(), 290);
    EXPECT_EQ(d["answered"].get<int>(), 1);
    // Still found, and still serving.
    const test::ProcessResult plan = in_host(lan, 1, {"plan", "-m", model, "--discover", "--key", key});
    EXPECT_EQ(discovered(plan.err), std::vector<std::string>{to + ":7000"}) << plan.err;
    const test::ProcessResult run = in_host(lan, 1, {"run", "-m", model, "--workers", to + ":7000", "--key", key, "-p",
                                                     "Once upon a time", "-n", "8", "--temp", "0", "-t", "1"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
}

// A root whose cable is pulled mid-session (no FIN, no RST reaches the
// worker): the worker drops the session after its silence bound and serves
// a root on another host; status showed the session and its last sign of
// life meanwhile.
TEST(LanDiscovery, ARootCutOffMidSessionFreesTheWorkerWithinTheBound) {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root; run the suite as root to include this test";
    Lan lan(3);
    ASSERT_TRUE(lan.ok()) << "could not create network namespaces (ip netns, veth, bridge)";
    const std::string key = key_file("cut_key"), model = test::default_model();
    LanWorker worker(lan, 2, {"--key", key, "-m", model, "--root-silence-ms", "3000"},
                     lan_discovery_dir() + "/cut.log");
    ASSERT_TRUE(worker.started()) << worker.log();
    const std::string address = lan.ip(2) + ":7000";
    // A chat on h1 whose user never types again: its input is a FIFO this
    // test holds open, so its session stays open.
    const std::string fifo = lan_discovery_dir() + "/chat_input";
    std::remove(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const int input = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // never blocks, unlike O_WRONLY
    ASSERT_GE(input, 0);
    const std::string line = "Once upon a time\n";
    ASSERT_EQ(::write(input, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    BackgroundProcess chat({"/bin/sh", "-c",
                            "exec /usr/sbin/ip netns exec " + lan.ns(1) + " " + test::tessera_binary() + " chat -m " +
                                model + " --workers " + address + " --key " + key + " -n 4 --temp 0 -t 1 < " + fifo +
                                " > /dev/null 2>&1"});
    const auto begun = std::chrono::steady_clock::now();
    nlohmann::json session;
    while (std::chrono::steady_clock::now() - begun < std::chrono::seconds(60)) {
        const test::ProcessResult s = in_host(lan, 3, {"status", "--workers", address, "--key", key, "--json"});
        if (s.exit_code == 0) session = nlohmann::json::parse(s.out)[0]["session"];
        if (session.is_object() && session["rows"].get<int>() > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(session.is_object()) << worker.log();
    EXPECT_NE(session["role"].get<std::string>().find("tensor-parallel rank 1"), std::string::npos) << session.dump();
    EXPECT_LT(session["root_silent_s"].get<double>(), 2.5) << "an idle chat's root beats";
    ASSERT_TRUE(lan.cut(1));
    const auto cut = std::chrono::steady_clock::now();
    test::ProcessResult run;
    for (;;) {
        run = in_host(lan, 3, {"run", "-m", model, "--workers", address, "--key", key, "-p", "Once upon a time", "-n", "8",
                               "--temp", "0", "-t", "1", "--recover-ms", "0"});
        if (run.exit_code == 0 || std::chrono::steady_clock::now() - cut > std::chrono::seconds(20)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    const double freed = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
    EXPECT_EQ(run.exit_code, 0) << run.err << worker.log();
    EXPECT_LE(freed, 3.0 + 4.0) << "the bound (3 s) plus a run's own time";
    std::printf("a root cut off: another root served %.2f s after the cut (bound 3 s)\n", freed);
    EXPECT_NE(worker.log().find("sent nothing, not even a heartbeat"), std::string::npos) << worker.log();
    ::close(input);
}

}  // namespace
}  // namespace tessera
