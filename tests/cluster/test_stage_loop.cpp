// A pipeline stage at the end of a session (cluster/pipeline/stage_loop.h):
// the previous stage may hang up before the root's goodbye arrives, and a
// heartbeat the root sent just before that goodbye may come first. The
// stage ends cleanly then, and still reports a hang-up the root does not
// follow with its goodbye. Real loopback TCP, a real stage on a small model.
#include "cluster/pipeline/stage_loop.h"
#include "cluster/session/messages.h"
#include "model/llama_model.h"
#include "model/random_model.h"
#include "model/slice_forward.h"
#include "test_paths.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tessera {
namespace {

// Both ends of a loopback connection as frame channels.
std::pair<std::unique_ptr<FrameChannel>, std::unique_ptr<FrameChannel>> channel_pair() {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    TcpStream client = TcpStream::connect({"127.0.0.1", listener.port()}, 2000);
    TcpStream server = listener.accept(2000);
    return {std::make_unique<FrameChannel>(std::move(client), ChannelLimits{}),
            std::make_unique<FrameChannel>(std::move(server), ChannelLimits{})};
}

void send_empty(FrameChannel& c, SessionMessage type) {
    c.send(static_cast<uint16_t>(type), std::span<const uint8_t>());
}

// Runs a last stage whose previous stage hangs up once it is linked; then
// `root_after` plays the root. Returns the stage's error ("" when it ended
// cleanly).
std::string stage_after_hang_up(const std::function<void(FrameChannel& root)>& root_after) {
    const std::string path = test::scratch_dir("stage_loop") + "/model.gguf";
    RandomModelSpec spec;
    spec.n_layer = 2;
    write_random_model(spec, path);
    const LlamaModel model(path);
    ThreadPool pool(1);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = 2;
    SliceForward forward(model, full_slice(model.hparams()), config, pool);

    auto [root, control] = channel_pair();
    auto [prev, from_prev] = channel_pair();
    StageLinks links;
    links.has_prev = true;
    links.fingerprint = "same model";
    const AcceptPrevious accept = [&](int) {
        PreviousStage p;
        p.channel = std::move(from_prev);
        p.hello = {{"fingerprint", "same model"}};
        return p;
    };
    std::string error;
    std::thread stage([&] {
        try {
            serve_stage(*control, accept, forward, forward, links, ChannelLimits{}, nullptr);
        } catch (const std::exception& e) {
            error = e.what();
            if (error.empty()) error = "an error without a message";
        }
    });
    Frame frame;
    root->recv(frame, 10000);
    EXPECT_EQ(frame.type, static_cast<uint16_t>(SessionMessage::kReady));
    prev.reset();  // the previous stage hangs up
    // The stage sees the hang-up first and waits for the root's word.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    root_after(*root);
    stage.join();
    return error;
}

}  // namespace

TEST(StageLoop, APreviousStageHangingUpBeforeTheRootsGoodbyeEndsTheSessionCleanly) {
    EXPECT_EQ(stage_after_hang_up([](FrameChannel& root) { send_empty(root, SessionMessage::kShutdown); }), "");
    // A beat the root sent before its goodbye arrives first.
    EXPECT_EQ(stage_after_hang_up([](FrameChannel& root) {
                  send_empty(root, SessionMessage::kHeartbeat);
                  send_empty(root, SessionMessage::kHeartbeat);
                  send_empty(root, SessionMessage::kShutdown);
              }),
              "");
}

TEST(StageLoop, AHangUpTheRootDoesNotEndIsReported) {
    // The root says nothing within the grace: the hang-up is the error.
    const auto t0 = std::chrono::steady_clock::now();
    const std::string silent = stage_after_hang_up([](FrameChannel&) {});
    EXPECT_NE(silent.find("connection closed by the peer"), std::string::npos) << silent;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    // The root beats but sends some other message: still the hang-up.
    const std::string other = stage_after_hang_up([](FrameChannel& root) {
        send_empty(root, SessionMessage::kHeartbeat);
        send_empty(root, SessionMessage::kSeqRuns);
    });
    EXPECT_NE(other.find("connection closed by the peer"), std::string::npos) << other;
}

}  // namespace tessera
