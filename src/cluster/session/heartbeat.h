// Heartbeats on a channel while its owner is busy, so the peer can tell a
// slow step from a stalled process: a tensor-parallel worker computing a
// partial, a pipeline stage whose rows are on their way. Every send on the
// channel, the owner's too, holds one mutex.
#pragma once

#include "net/channel.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tessera {

constexpr int kHeartbeatIntervalMs = 1000;

class Heartbeat {
public:
    Heartbeat(FrameChannel& channel, std::mutex& send_mutex);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    // Beats only while busy. Called twice per step of the token loop, so it
    // only stores a flag: waking the beating thread each time would cost a
    // context switch per step on the core the step needs.
    void set_busy(bool busy) { busy_.store(busy, std::memory_order_relaxed); }

private:
    void loop();

    FrameChannel& channel_;
    std::mutex& send_mutex_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<bool> busy_{false};
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace tessera
