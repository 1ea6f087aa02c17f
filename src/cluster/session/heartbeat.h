// Heartbeats on a session's channels, so the other end can tell a slow or
// idle peer from a vanished one.
//  - A worker beats to its root while it is busy: a tensor-parallel worker
//    computing a partial, a pipeline stage whose rows are on their way; the
//    root tells a stalled worker from a slow one.
//  - A root beats to every node of its plan all session long, busy or idle (a
//    serve between requests, a chat waiting for its user): a worker drops a
//    session whose root sent nothing for its --root-silence-ms (a root that
//    lost power or its cable), and serves the next root.
// Every send on a channel holds the channel's own lock (FrameChannel::send),
// so a beat never splits another frame.
#pragma once

#include "net/channel.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {

constexpr int kHeartbeatIntervalMs = 1000;

class Heartbeat {
public:
    // A worker's: beats on `channel` only while set_busy(true); `send_mutex`
    // is held around each beat (the owner's sends that must stay together).
    Heartbeat(FrameChannel& channel, std::mutex& send_mutex);
    // A root's: beats on every channel until destroyed.
    explicit Heartbeat(std::vector<FrameChannel*> channels);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    // Beats only while busy. Called twice per step of the token loop, so it
    // only stores a flag: waking the beating thread each time would cost a
    // context switch per step on the core the step needs.
    void set_busy(bool busy) { busy_.store(busy, std::memory_order_relaxed); }

private:
    void loop();

    std::vector<FrameChannel*> channels_;
    std::mutex* send_mutex_ = nullptr;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<bool> busy_{false};
    bool stop_ = false;
    std::thread thread_;
};

// A root's beat on each of these channels (none: null).
std::unique_ptr<Heartbeat> beat_to_nodes(const std::vector<std::unique_ptr<FrameChannel>>& channels);

// Called by a root between its nodes' kReady and loading its own share: a
// share of a large model takes longer to load than a worker's silence bound,
// so the beat must already run. The environment variable
// TESSERA_TEST_ROOT_LOAD_DELAY_MS (tests only) makes that load this much
// slower, so a test can show that the beat covers it.
void before_root_load();

// How long a worker waits for any frame from its root (a heartbeat counts)
// before it drops the session: `tessera worker --root-silence-ms`.
constexpr int kDefaultRootSilenceMs = 15000;

// What a session's loops tell the status view (worker_status.h): when the
// root was last heard (unix seconds), and the rows (tokens) computed.
struct SessionPulse {
    std::atomic<double> root_heard{0.0};
    std::atomic<uint64_t> rows{0};
};

// A worker's watch on its root: heard() at each frame from it; check() in
// the idle wait throws once nothing came for longer than the limit (0 or
// less: never).
class RootSilence {
public:
    // `pulse` (optional) is told each time the root is heard.
    RootSilence(int limit_ms, std::string root, SessionPulse* pulse = nullptr);
    void heard();
    void check() const;
    // Seconds since the last frame from the root.
    double silent_seconds() const;

private:
    int limit_ms_;
    std::string root_;
    SessionPulse* pulse_;
    double last_;
};

}  // namespace tessera
