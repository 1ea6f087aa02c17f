// The first frames on every connection: both ends prove they hold the
// cluster's key before either reveals anything, then seal every later frame.
//
//   client -> server  hello      mode (1: keyed, 0: plain) | client nonce (32)
//   server -> client  challenge  mode | server nonce (32) | server proof (32)
//   client -> server  proof      client proof (32)              (keyed only)
//   server -> client  accepted   (the first sealed frame)       (keyed only)
//
// A proof is a keyed BLAKE2b MAC over both nonces with a label per side; the
// session keys (one per direction) are derived the same way with their own
// labels. Fresh nonces on both sides make every session's keys new, so a
// recorded session replayed on a new connection fails at its first frame.
// Either side that finds the other's proof wrong sends `refused` (plain) and
// closes, so both ends report a key mismatch within one round trip.
// Plain mode (no key on either side) skips the proofs and seals nothing; a
// keyed end never talks to a plain one.
#pragma once

#include "net/channel.h"
#include "net/wire_key.h"

#include <cstdint>

namespace tessera {

// Frame types of the handshake (the rest of the protocol numbers its own
// messages below 0x100).
enum class AuthFrame : uint16_t { kHello = 0x7a01, kChallenge = 0x7a02, kProof = 0x7a03, kAccepted = 0x7a04,
                                  kRefused = 0x7a05 };

// The largest frame a peer may send before it has proved the key.
constexpr uint32_t kUnauthenticatedMaxPayload = 64u << 10;

// The connecting side. `key` null: plain mode. The whole exchange completes
// within timeout_ms; throws an Error naming the peer otherwise (wrong key,
// plain peer, timeout). On return the channel seals its frames (keyed mode).
// Returns the first round trip (hello to challenge), in seconds.
double authenticate_as_client(FrameChannel& channel, const WireKey* key, int timeout_ms);

// The accepting side. The channel's payload cap is kUnauthenticatedMaxPayload
// until the peer has proved the key, then restored to `max_payload`.
void authenticate_as_server(FrameChannel& channel, const WireKey* key, int timeout_ms, uint32_t max_payload);

}  // namespace tessera
