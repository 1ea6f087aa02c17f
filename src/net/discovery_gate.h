// What a worker does with an authentic discovery probe: answer it, or drop it
// as stale (its root's clock too far from this one's: a recording replayed
// later), replayed (its id seen within the window), or over the rate (a
// flood; each answer costs a datagram). Pure logic on the caller's clock, so
// tests drive it with any times.
#pragma once

#include "net/discovery_packets.h"

#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace tessera {

// kDuplicate: the same probe again within kDuplicateMs of its first arrival,
// as a root's one probe arrives by every path it was sent on (broadcast,
// multicast, IPv6); dropped, but not a replay.
enum class ProbeDecision { kAnswer, kDuplicate, kStale, kReplayed, kRateLimited };
constexpr int64_t kDuplicateMs = 2000;

class DiscoveryGate {
public:
    // Probes within clock_window_ms of this clock (either way: boards without
    // a battery-backed clock drift) are fresh; their ids are remembered for
    // twice that, at most `remembered` of them (the oldest forgotten first);
    // answers come at most `per_second` on average, `burst` at once.
    explicit DiscoveryGate(int64_t clock_window_ms = 300000, double per_second = 20.0, double burst = 40.0,
                           size_t remembered = 8192);

    ProbeDecision admit(const DiscoveryProbe& probe, int64_t now_ms);

private:
    int64_t window_ms_;
    double per_second_, burst_, tokens_;
    int64_t refilled_ms_ = INT64_MIN;
    size_t remembered_;
    std::map<DiscoveryId, int64_t> seen_;  // id -> when first seen
    std::deque<std::pair<int64_t, DiscoveryId>> order_;  // when each id was seen, oldest first
};

}  // namespace tessera
