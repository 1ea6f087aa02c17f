// A vanished root frees its workers (issue: home-lab operations, item 5).
// Roots beat every second on every node's channel, busy or idle; a worker
// drops a session whose root sent nothing for --root-silence-ms and serves the
// next root. A root that is merely idle (a chat waiting for its user) keeps
// its workers however long it waits.
#include "hostile_peer.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tessera {
namespace {

using test::WorkerProcess;

std::string vanished_root_dir() { return test::test_dir("vanished_root"); }

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Greets the worker as a root would; true when it answers "busy".
bool busy(const HostPort& worker) {
    auto channel = test::connect_as_root(worker, nullptr);
    send_json(*channel, SessionMessage::kHello, test::good_hello());
    const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
    return reply.value("busy", false);
}

// A root that completes hello and assign, then goes silent with its
// connection open (as one that lost power or its cable): the worker is busy
// for the silence bound, then free, and a real root is served.
TEST(VanishedRoot, ASilentRootAfterItsAssignFreesTheWorkerWithinTheBound) {
    constexpr double kBound = 2.0;
    WorkerProcess worker({"-m", test::default_model(), "--root-silence-ms", "2000"},
                         vanished_root_dir() + "/silent.log");
    auto silent = test::connect_as_root(worker.address(), nullptr);
    send_json(*silent, SessionMessage::kHello, test::good_hello());
    ASSERT_TRUE(recv_json(*silent, SessionMessage::kHelloReply, "worker", 5000).value("ok", false));
    send_json(*silent, SessionMessage::kAssign, test::good_assign());
    ASSERT_TRUE(recv_json(*silent, SessionMessage::kReady, "worker", 5000).value("ok", false));
    const auto assigned = std::chrono::steady_clock::now();
    EXPECT_TRUE(busy(worker.address())) << "a root that is only quiet for a moment keeps its worker";
    while (busy(worker.address())) {
        ASSERT_LT(seconds_since(assigned), kBound + 5.0) << worker.log();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double freed = seconds_since(assigned);
    EXPECT_GE(freed, kBound - 0.2);
    EXPECT_LE(freed, kBound + 2.0);
    EXPECT_NE(worker.log().find("sent nothing, not even a heartbeat"), std::string::npos) << worker.log();
    const test::ProcessResult r = test::run_root(worker.address_text(), "");
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A chat whose user waits longer than the bound between turns keeps its
// tensor-parallel worker and its pipeline stage: the root beats while idle.
TEST(VanishedRoot, AnIdleChatKeepsItsWorkersBeyondTheBound) {
    WorkerProcess rank({"-m", test::default_model(), "--root-silence-ms", "1500"}, vanished_root_dir() + "/rank.log");
    WorkerProcess stage({"-m", test::default_model(), "--root-silence-ms", "1500"}, vanished_root_dir() + "/stage.log");
    for (const std::vector<std::string>& plan :
         {std::vector<std::string>{"--workers", rank.address_text()},
          std::vector<std::string>{"--stages", "root/" + stage.address_text()}}) {
        std::string command = "(printf 'Once upon a time\\n'; sleep 4; printf 'What did the dog do?\\n/exit\\n') | '" +
                              test::tessera_binary() + "' chat -m '" + test::default_model() +
                              "' -n 8 --temp 0 -t 1";
        for (const std::string& a : plan) command += " '" + a + "'";
        const test::ProcessResult r = test::run_process({"/bin/sh", "-c", command}, 120);
        EXPECT_EQ(r.exit_code, 0) << plan[0] << ": " << r.err;
        EXPECT_EQ(r.err.find("error"), std::string::npos) << plan[0] << ": " << r.err;
    }
    EXPECT_EQ(rank.log().find("sent nothing"), std::string::npos) << rank.log();
    EXPECT_EQ(stage.log().find("sent nothing"), std::string::npos) << stage.log();
    EXPECT_NE(rank.log().find("ended"), std::string::npos) << rank.log();
}

// A root whose own share takes longer to load than its workers' silence
// bound (a 17 GB model's half) keeps them: it beats from the moment every
// node is ready, before loading its share. (The load is made slow here by a
// test-only delay; a worker ends its session if the beat started later.)
TEST(VanishedRoot, ARootStillLoadingItsShareKeepsItsWorkers) {
    WorkerProcess rank({"-m", test::default_model(), "--root-silence-ms", "1500"},
                       vanished_root_dir() + "/loading_rank.log");
    WorkerProcess stage({"-m", test::default_model(), "--root-silence-ms", "1500"},
                        vanished_root_dir() + "/loading_stage.log");
    for (const std::vector<std::string>& plan :
         {std::vector<std::string>{"--workers", rank.address_text()},
          std::vector<std::string>{"--stages", "root/" + stage.address_text()}}) {
        std::string command = "TESSERA_TEST_ROOT_LOAD_DELAY_MS=4000 '" + test::tessera_binary() + "' run -m '" +
                              test::default_model() + "' -p 'Once upon a time' -n 8 --temp 0 -t 1";
        for (const std::string& a : plan) command += " '" + a + "'";
        const test::ProcessResult r = test::run_process({"/bin/sh", "-c", command}, 120);
        EXPECT_EQ(r.exit_code, 0) << plan[0] << ": " << r.err;
    }
    EXPECT_EQ(rank.log().find("sent nothing"), std::string::npos) << rank.log();
    EXPECT_EQ(stage.log().find("sent nothing"), std::string::npos) << stage.log();
}

}  // namespace
}  // namespace tessera
