// A worker's status (issue: home-lab operations, item 2) on loopback: `tessera
// status` answers busy or not, names what the worker holds and the session
// it serves with its root's last sign of life; --metrics-port serves the same
// in Prometheus' text format; status asks nothing of the session it observes.
#include "hostile_peer.h"
#include "net/handshake.h"
#include "net/tcp.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <thread>

namespace tessera {
namespace {

using test::WorkerProcess;

std::string worker_status_dir() { return test::test_dir("worker_status"); }

uint16_t free_port() {
    TcpListener probe(HostPort{"127.0.0.1", 0});
    return probe.port();
}

// A metric's value from Prometheus text ("name{labels} value" or "name value").
double metric(const std::string& text, const std::string& name) {
    const std::regex line("(^|\\n)" + name + "(\\{[^}]*\\})? ([^\\n]+)");
    std::smatch m;
    if (!std::regex_search(text, m, line)) return -1.0;
    return std::stod(m[3]);
}

TEST(WorkerStatus, StatusAndMetricsShowTheSessionAndItsRootsLastSignOfLife) {
    const uint16_t metrics_port = free_port();
    WorkerProcess worker({"-m", test::default_model(), "--metrics-port", std::to_string(metrics_port)},
                         worker_status_dir() + "/worker.log");
    httplib::Client http("127.0.0.1", metrics_port);
    auto idle = http.Get("/metrics");
    ASSERT_TRUE(idle) << worker.log();
    EXPECT_EQ(idle->status, 200);
    EXPECT_NE(idle->body.find("tessera_worker_info{version=\""), std::string::npos) << idle->body;
    EXPECT_EQ(metric(idle->body, "tessera_worker_session_active"), 0.0) << idle->body;
    EXPECT_EQ(metric(idle->body, "tessera_worker_root_silent_seconds"), -1.0) << "no session, no such gauge";

    // A root that assigned its slice and then stays quiet (this worker's
    // default silence bound is 15 s).
    auto root = test::connect_as_root(worker.address(), nullptr);
    send_json(*root, SessionMessage::kHello, test::good_hello());
    ASSERT_TRUE(recv_json(*root, SessionMessage::kHelloReply, "worker", 5000).value("ok", false));
    send_json(*root, SessionMessage::kAssign, test::good_assign());
    ASSERT_TRUE(recv_json(*root, SessionMessage::kReady, "worker", 5000).value("ok", false));
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));

    const test::ProcessResult status =
        test::run_process(test::tessera_cmd({"status", "--workers", worker.address_text(), "--json"}), 30);
    ASSERT_EQ(status.exit_code, 0) << status.err;
    const nlohmann::json s = nlohmann::json::parse(status.out)[0];
    SCOPED_TRACE(s.dump());
    ASSERT_TRUE(s["session"].is_object());
    EXPECT_NE(s["session"]["role"].get<std::string>().find("tensor-parallel rank 1, layers [0, 5)"), std::string::npos);
    EXPECT_GE(s["session"]["root_silent_s"].get<double>(), 1.0);
    EXPECT_EQ(s["models"][0]["fingerprint"], test::default_fingerprint());
    EXPECT_EQ(s["models"][0]["kind"], "model file");
    EXPECT_FALSE(s["keyed"].get<bool>());
    EXPECT_EQ(s.value("discovery", nlohmann::json()), nlohmann::json()) << "not advertising";

    auto busy = http.Get("/metrics");
    ASSERT_TRUE(busy);
    EXPECT_EQ(metric(busy->body, "tessera_worker_session_active"), 1.0) << busy->body;
    EXPECT_GE(metric(busy->body, "tessera_worker_root_silent_seconds"), 1.0) << busy->body;
    auto json_status = http.Get("/status");
    ASSERT_TRUE(json_status);
    EXPECT_TRUE(nlohmann::json::parse(json_status->body)["session"].is_object());

    // The text view of the same, and the session goes on unharmed.
    const test::ProcessResult text =
        test::run_process(test::tessera_cmd({"status", "--workers", worker.address_text()}), 30);
    EXPECT_NE(text.out.find("serving root 127.0.0.1:"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("model file stories260K.gguf"), std::string::npos) << text.out;
    send_json(*root, SessionMessage::kShutdown, nlohmann::json::object());
    root.reset();
    for (int i = 0; i < 50 && metric(http.Get("/metrics")->body, "tessera_worker_sessions_served_total") < 1.0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(metric(http.Get("/metrics")->body, "tessera_worker_sessions_served_total"), 1.0);
    // An unreachable worker is a line of its own and a failing exit code.
    const test::ProcessResult gone = test::run_process(
        test::tessera_cmd({"status", "--workers", "127.0.0.1:" + std::to_string(free_port()), "--timeout-ms", "500"}), 30);
    EXPECT_EQ(gone.exit_code, 1);
    EXPECT_NE(gone.out.find("unreachable"), std::string::npos) << gone.out;
}

// A peer answering `tessera status` as it likes: mistyped fields are shown as
// unknown, an oversized answer and a silent peer are errors naming it within
// --timeout-ms, never a crash or a hang.
TEST(WorkerStatus, AStatusCommandSurvivesAHostileOrSilentWorker) {
    enum class Mode { kMistyped, kOversized, kSilent };
    for (const Mode mode : {Mode::kMistyped, Mode::kOversized, Mode::kSilent}) {
        TcpListener listener(HostPort{"127.0.0.1", 0});
        std::thread peer([&] {
            try {
                FrameChannel channel(listener.accept(10000), ChannelLimits{64u << 20, 5000, 0});
                authenticate_as_server(channel, nullptr, 5000, 64u << 20);
                Frame frame;
                channel.recv(frame, 5000);
                if (mode == Mode::kMistyped) {
                    send_json(channel, SessionMessage::kStatusReply,
                              {{"version", 5}, {"protocol", "two"}, {"threads", -1}, {"models", "none"},
                               {"session", {1, 2}}, {"discovery", {{"answered", "lots"}, {"dropped", 7}}},
                               {"free_memory", nlohmann::json::array()}});
                } else if (mode == Mode::kOversized) {
                    channel.send(static_cast<uint16_t>(SessionMessage::kStatusReply), std::vector<uint8_t>(2u << 20, '1'));
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(mode == Mode::kSilent ? 3000 : 200));
            } catch (const Error&) {
            }
        });
        const auto start = std::chrono::steady_clock::now();
        const test::ProcessResult r = test::run_process(
            test::tessera_cmd({"status", "--workers", "127.0.0.1:" + std::to_string(listener.port()), "--timeout-ms",
                               "1000"}),
            30);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        peer.join();
        SCOPED_TRACE(static_cast<int>(mode));
        if (mode == Mode::kMistyped) {
            EXPECT_EQ(r.exit_code, 0) << r.err;
            EXPECT_NE(r.out.find("tessera ? (protocol 0)"), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("discovery: answered 0"), std::string::npos) << r.out;
        } else {
            EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
            EXPECT_NE(r.out.find("unreachable"), std::string::npos) << r.out;
            EXPECT_LT(seconds, 10.0);
        }
    }
}

}  // namespace
}  // namespace tessera
