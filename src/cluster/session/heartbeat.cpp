#include "cluster/session/heartbeat.h"

#include "cluster/session/messages.h"
#include "util/error.h"

#include <chrono>

namespace tessera {

Heartbeat::Heartbeat(FrameChannel& channel, std::mutex& send_mutex) : channel_(channel), send_mutex_(send_mutex) {
    thread_ = std::thread([this] { loop(); });
}

Heartbeat::~Heartbeat() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void Heartbeat::loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
        wake_.wait_for(lock, std::chrono::milliseconds(kHeartbeatIntervalMs));
        if (stop_ || !busy_.load(std::memory_order_relaxed)) continue;
        lock.unlock();
        try {
            std::lock_guard<std::mutex> send(send_mutex_);
            channel_.send(static_cast<uint16_t>(SessionMessage::kHeartbeat), std::span<const uint8_t>());
        } catch (const Error&) {
            // The owner sees the broken connection on its next send.
        }
        lock.lock();
    }
}

}  // namespace tessera
