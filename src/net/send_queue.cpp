#include "net/send_queue.h"

#include <utility>

namespace tessera {

SendQueue::SendQueue(FrameChannel& channel) : channel_(channel), thread_([this] { loop(); }) {}

SendQueue::~SendQueue() {
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
}

void SendQueue::rethrow_locked() {
    if (error_) std::rethrow_exception(error_);
}

void SendQueue::push(uint16_t type, std::vector<uint8_t> payload) {
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        rethrow_locked();
        frames_.emplace_back(type, std::move(payload));
    }
    changed_.notify_all();
}

void SendQueue::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return (frames_.empty() && !sending_) || error_; });
    rethrow_locked();
}

void SendQueue::loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stop_ || !frames_.empty(); });
        if (frames_.empty() || error_) {
            if (stop_) return;
            frames_.clear();
            changed_.notify_all();
            continue;
        }
        std::pair<uint16_t, std::vector<uint8_t>> frame = std::move(frames_.front());
        frames_.pop_front();
        sending_ = true;
        lock.unlock();
        try {
            channel_.send(frame.first, frame.second);
        } catch (...) {
            lock.lock();
            error_ = std::current_exception();
            sending_ = false;
            changed_.notify_all();
            continue;
        }
        lock.lock();
        sending_ = false;
        changed_.notify_all();
    }
}

}  // namespace tessera
