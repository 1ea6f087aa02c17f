#include "cluster/planner/link_probe.h"

#include "cluster/session/messages.h"
#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <vector>

namespace tessera {

namespace {

constexpr int kPings = 7;
constexpr size_t kBulkFrameBytes = 256u << 10;
constexpr int kTimedBulkFrames = 4;

void expect_probe(const Frame& frame, size_t bytes, const std::string& who) {
    if (frame.type != static_cast<uint16_t>(SessionMessage::kLinkProbe) || frame.payload.size() != bytes) {
        throw make_error("{}: answered a link probe with a {} frame of {} bytes", who, tp_message_name(frame.type),
                         frame.payload.size());
    }
}

}  // namespace

LinkCost measure_link(FrameChannel& channel, const std::string& who, int timeout_ms) {
    const auto probe = static_cast<uint16_t>(SessionMessage::kLinkProbe);
    Frame frame;
    std::vector<double> rtts;
    std::vector<uint8_t> ping(16, 0);
    ping[0] = kProbePing;
    for (int i = 0; i < kPings; ++i) {
        ping[1] = static_cast<uint8_t>(i);
        const double start = now_seconds();
        channel.send(probe, ping);
        channel.recv(frame, timeout_ms);
        rtts.push_back(now_seconds() - start);
        expect_probe(frame, ping.size(), who);
        if (frame.payload != ping) throw make_error("{}: echoed a different ping", who);
    }
    std::sort(rtts.begin(), rtts.end());
    LinkCost cost;
    cost.rtt_seconds = rtts[rtts.size() / 2];

    std::vector<uint8_t> bulk(kBulkFrameBytes, 0x5a);
    bulk[0] = kProbeBulk;
    channel.send(probe, bulk);  // warm-up
    channel.recv(frame, timeout_ms);
    expect_probe(frame, 1, who);
    const double start = now_seconds();
    for (int i = 0; i < kTimedBulkFrames; ++i) channel.send(probe, bulk);
    for (int i = 0; i < kTimedBulkFrames; ++i) {
        channel.recv(frame, timeout_ms);
        expect_probe(frame, 1, who);
    }
    // The last answer's trip back is latency, not transfer. A link faster
    // than the clock can tell (loopback) is charged 1 µs.
    const double transfer = std::max(now_seconds() - start - cost.rtt_seconds / 2, 1e-6);
    cost.bytes_per_second = static_cast<double>(kTimedBulkFrames * bulk.size()) / transfer;
    return cost;
}

void answer_link_probe(FrameChannel& channel, const Frame& frame, int& answered, const std::string& peer) {
    if (++answered > kMaxProbeFrames) throw make_error("{}: more than {} link probes", peer, kMaxProbeFrames);
    if (frame.payload.empty()) throw make_error("{}: an empty link probe", peer);
    const auto probe = static_cast<uint16_t>(SessionMessage::kLinkProbe);
    if (frame.payload[0] == kProbePing) {
        if (frame.payload.size() > kMaxPingBytes) {
            throw make_error("{}: a ping of {} bytes (at most {})", peer, frame.payload.size(), kMaxPingBytes);
        }
        channel.send(probe, frame.payload);
    } else if (frame.payload[0] == kProbeBulk) {
        if (frame.payload.size() > kMaxBulkProbeBytes) {
            throw make_error("{}: a bulk probe of {} bytes (at most {})", peer, frame.payload.size(), kMaxBulkProbeBytes);
        }
        const uint8_t done = kProbeBulk;
        channel.send(probe, std::span<const uint8_t>(&done, 1));
    } else {
        throw make_error("{}: a link probe of unknown kind {}", peer, frame.payload[0]);
    }
}

}  // namespace tessera
