// Frames sent from a thread of their own, in order: the caller queues them
// and goes on reading its channel. Two peers that each send a large message
// while the other is sending too would otherwise both block in send with
// full socket buffers, and neither would read again (sequence-parallel
// prefill: a node's rows to the root, the root's rows to the node).
#pragma once

#include "net/channel.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class SendQueue {
public:
    explicit SendQueue(FrameChannel& channel);
    // Stops after the frames already queued have gone (or one has failed).
    ~SendQueue();
    SendQueue(const SendQueue&) = delete;
    SendQueue& operator=(const SendQueue&) = delete;

    // Queues a frame; rethrows the error of an earlier frame that failed.
    void push(uint16_t type, std::vector<uint8_t> payload);
    // Waits until every queued frame has gone; rethrows a failure.
    void drain();

private:
    void loop();
    void rethrow_locked();

    FrameChannel& channel_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::pair<uint16_t, std::vector<uint8_t>>> frames_;
    bool sending_ = false;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

}  // namespace tessera
