// A root and a worker of different releases (issue: home-lab operations,
// item 3): they exchange their protocol version and release in the hello,
// and a mismatch is one line naming both releases and the end to upgrade,
// from either end, never a failure later in the session.
#include "cluster/session/session_messages.h"
#include "hostile_peer.h"
#include "test_paths.h"
#include "util/version.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessera {
namespace {

using test::FakeWorker;
using test::WorkerProcess;

std::string protocol_versions_dir() { return test::test_dir("protocol_versions"); }

// The worker's reply to a hello carrying these protocol fields.
json reply_to(const HostPort& worker, const json& protocol) {
    auto channel = test::connect_as_root(worker, nullptr);
    json hello = test::good_hello();
    hello.erase("protocol");
    hello.erase("version");
    hello.update(protocol);
    send_json(*channel, SessionMessage::kHello, hello);
    return recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
}

TEST(ProtocolVersions, AWorkerRefusesARootOfAnotherReleaseNamingBoth) {
    WorkerProcess worker({"-m", test::default_model()}, protocol_versions_dir() + "/worker.log");
    const std::string ours = tessera_version();

    const json newer = reply_to(worker.address(), {{"protocol", kProtocolVersion + 1}, {"version", "1.4.2"}});
    EXPECT_FALSE(newer.value("ok", true));
    EXPECT_EQ(newer.value("protocol", 0), kProtocolVersion);  // so the root can name the worker's release
    EXPECT_EQ(newer.value("version", ""), ours);
    const std::string e = newer.value("error", "");
    EXPECT_NE(e.find("runs tessera 1.4.2 (protocol " + std::to_string(kProtocolVersion + 1) + ")"), std::string::npos) << e;
    EXPECT_NE(e.find("this worker tessera " + ours), std::string::npos) << e;
    EXPECT_NE(e.find("upgrade this worker to tessera 1.4.2"), std::string::npos) << e;

    // A root before 0.9 sent no version at all.
    const json old = reply_to(worker.address(), json::object());
    EXPECT_NE(old.value("error", "").find("runs a release before 0.9 (protocol 1)"), std::string::npos) << old.dump();
    EXPECT_NE(old.value("error", "").find("upgrade that root to tessera " + ours), std::string::npos) << old.dump();

    // Mistyped fields are a mismatch too, and the worker goes on serving.
    const json odd = reply_to(worker.address(), {{"protocol", "2"}, {"version", std::string(500, 'x')}});
    EXPECT_FALSE(odd.value("ok", true));
    EXPECT_LT(odd.value("error", "").size(), 400u) << "the peer's version is cut, not echoed whole";
    const test::ProcessResult r = test::run_root(worker.address_text(), "");
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(ProtocolVersions, ARootRefusesAWorkerOfAnotherReleaseInOneLine) {
    const std::string ours = tessera_version();
    struct Case {
        json reply;
        std::string want;
    };
    const std::vector<Case> cases = {
        // A newer worker refuses the session itself, with its own fields.
        {{{"ok", false}, {"error", "refused"}, {"protocol", kProtocolVersion + 1}, {"version", "2.0.0"}},
         "runs tessera 2.0.0 (protocol " + std::to_string(kProtocolVersion + 1) + "), this root tessera " + ours +
             " (protocol " + std::to_string(kProtocolVersion) + "): upgrade this root to tessera 2.0.0"},
        // A worker before 0.9 accepted any hello and sent no version.
        {{{"ok", true}, {"threads", 1}, {"free_memory", 1ull << 34}, {"has_model", true},
          {"fingerprint", test::default_fingerprint()}, {"probe_seconds", 1e-5}, {"protocol", nullptr}},
         "runs a release before 0.9 (protocol 1), this root tessera " + ours + " (protocol " +
             std::to_string(kProtocolVersion) + "): upgrade that worker to tessera " + ours},
    };
    for (const Case& c : cases) {
        FakeWorker fake(nullptr, [](FrameChannel&, const Frame&) {}, c.reply);
        const test::ProcessResult r = test::run_root(fake.address_text(), "");
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    }
}

}  // namespace
}  // namespace tessera
