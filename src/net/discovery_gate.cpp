#include "net/discovery_gate.h"

#include <algorithm>
#include <cstdlib>

namespace tessera {

DiscoveryGate::DiscoveryGate(int64_t clock_window_ms, double per_second, double burst, size_t remembered)
    : window_ms_(clock_window_ms), per_second_(per_second), burst_(burst), tokens_(burst), remembered_(remembered) {}

ProbeDecision DiscoveryGate::admit(const DiscoveryProbe& probe, int64_t now_ms) {
    // |now - sent| without overflow: the probe's time is a peer's 64 bits.
    const bool fresh = probe.time_ms > now_ms - window_ms_ && probe.time_ms < now_ms + window_ms_;
    if (!fresh) return ProbeDecision::kStale;
    while (!order_.empty() && (order_.front().first < now_ms - 2 * window_ms_ || order_.size() >= remembered_)) {
        seen_.erase(order_.front().second);
        order_.pop_front();
    }
    if (const auto seen = seen_.find(probe.id); seen != seen_.end()) {
        return now_ms - seen->second < kDuplicateMs ? ProbeDecision::kDuplicate : ProbeDecision::kReplayed;
    }
    // Remembered before the rate is checked: a probe dropped for the rate is
    // not answered later when replayed.
    seen_.emplace(probe.id, now_ms);
    order_.emplace_back(now_ms, probe.id);
    if (refilled_ms_ != INT64_MIN && now_ms > refilled_ms_) {
        tokens_ = std::min(burst_, tokens_ + per_second_ * static_cast<double>(now_ms - refilled_ms_) / 1e3);
    }
    refilled_ms_ = std::max(refilled_ms_, now_ms);
    if (tokens_ < 1.0) return ProbeDecision::kRateLimited;
    tokens_ -= 1.0;
    return ProbeDecision::kAnswer;
}

}  // namespace tessera
