// What a link costs, measured at the handshake: its round trip and the rate a
// bulk transfer reaches, both through the channel itself (sealing, framing
// and the kernel's buffers included), so the planner's predictions carry
// every cost a partial will meet.
//
// Between the hello-reply and the assign the root may send kLinkProbe frames;
// the first payload byte says what the worker does with one:
//   kPing: echoes it back (at most kMaxPingBytes);
//   kBulk: answers a one-byte kLinkProbe once it has all of it.
// A worker answers at most kMaxProbeFrames of them per session, so a peer
// cannot keep it busy, and never sends back more than it received.
#pragma once

#include "net/channel.h"

#include <cstdint>
#include <string>

namespace tessera {

struct LinkCost {
    double rtt_seconds = 0.0;        // median of the pings
    double bytes_per_second = 0.0;   // bulk rate after a warm-up frame
};

constexpr uint8_t kProbePing = 0;
constexpr uint8_t kProbeBulk = 1;
constexpr size_t kMaxPingBytes = 64;
constexpr size_t kMaxBulkProbeBytes = 1u << 20;
constexpr int kMaxProbeFrames = 64;

// The root's side: a few pings, a warm-up bulk frame (it opens TCP's window
// and empties a shaper's burst allowance), then bulk frames timed from the
// first send to the last answer. About 1.3 MiB travel; `who` names the peer
// in errors.
LinkCost measure_link(FrameChannel& channel, const std::string& who, int timeout_ms);

// The worker's side: answers one kLinkProbe frame. `answered` counts this
// session's probes; an Error past kMaxProbeFrames, or for a malformed probe.
void answer_link_probe(FrameChannel& channel, const Frame& frame, int& answered, const std::string& peer);

}  // namespace tessera
