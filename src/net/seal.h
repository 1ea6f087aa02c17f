// Sealed frames: every payload encrypted and authenticated with
// ChaCha20-Poly1305 (IETF, RFC 8439) under a per-session, per-direction key,
// with the frame's sequence number as the nonce and its 24-byte header as
// associated data. A forged, corrupted, replayed, reordered, truncated or
// cross-session frame fails to open, and the channel closes with an error
// naming the peer: a forged frame is a parse error, never code execution.
#pragma once

#include "net/channel.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

constexpr uint32_t kSealedFlag = 1;
constexpr uint32_t kSealTagBytes = 16;

struct SessionKeys {
    std::array<uint8_t, 32> send{};  // this side's frames
    std::array<uint8_t, 32> recv{};  // the peer's frames
};

// A codec sealing with `keys`; `peer` names the other end in errors.
std::unique_ptr<FrameCodec> make_sealing_codec(const SessionKeys& keys, std::string peer);

}  // namespace tessera
