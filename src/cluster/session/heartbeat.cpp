#include "cluster/session/heartbeat.h"

#include "cluster/session/messages.h"
#include "util/error.h"
#include "util/timer.h"

#include <chrono>
#include <cstdlib>

namespace tessera {

Heartbeat::Heartbeat(FrameChannel& channel, std::mutex& send_mutex) : channels_{&channel}, send_mutex_(&send_mutex) {
    thread_ = std::thread([this] { loop(); });
}

Heartbeat::Heartbeat(std::vector<FrameChannel*> channels) : channels_(std::move(channels)), busy_(true) {
    thread_ = std::thread([this] { loop(); });
}

std::unique_ptr<Heartbeat> beat_to_nodes(const std::vector<std::unique_ptr<FrameChannel>>& channels) {
    if (channels.empty()) return nullptr;
    std::vector<FrameChannel*> raw;
    for (const auto& c : channels) raw.push_back(c.get());
    return std::make_unique<Heartbeat>(std::move(raw));
}

void before_root_load() {
    const char* delay = std::getenv("TESSERA_TEST_ROOT_LOAD_DELAY_MS");
    if (delay == nullptr || *delay == '\0') return;
    const long ms = std::strtol(delay, nullptr, 10);
    if (ms > 0 && ms <= 60000) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
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
        for (FrameChannel* channel : channels_) {
            try {
                std::unique_lock<std::mutex> send;
                if (send_mutex_ != nullptr) send = std::unique_lock<std::mutex>(*send_mutex_);
                channel->send(static_cast<uint16_t>(SessionMessage::kHeartbeat), std::span<const uint8_t>());
            } catch (const Error&) {
                // The owner sees the broken connection on its next send.
            }
        }
        lock.lock();
    }
}

RootSilence::RootSilence(int limit_ms, std::string root, SessionPulse* pulse)
    : limit_ms_(limit_ms), root_(std::move(root)), pulse_(pulse), last_(now_seconds()) {
    heard();
}

void RootSilence::heard() {
    last_ = now_seconds();
    if (pulse_ != nullptr) pulse_->root_heard.store(unix_seconds(), std::memory_order_relaxed);
}

double RootSilence::silent_seconds() const { return now_seconds() - last_; }

void RootSilence::check() const {
    if (limit_ms_ <= 0 || silent_seconds() * 1e3 <= limit_ms_) return;
    throw make_error("the root {} sent nothing, not even a heartbeat, for {:.1f} s (--root-silence-ms {}): it is gone, "
                     "so its session ends and this worker serves the next root", root_, silent_seconds(), limit_ms_);
}

}  // namespace tessera
