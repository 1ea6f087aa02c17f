// The wire's unit: a fixed 24-byte little-endian header, then the payload.
//
//   magic u32 "TSRA" | version u16 | type u16 | sequence u64 | length u32 | flags u32
//
// The header is decoded and every field checked (magic, version, length
// against the receiver's cap) before a single payload byte is read, so a
// forged or oversized frame is a protocol error, never an allocation of
// whatever a peer claims. Sequence numbers count frames per direction; the
// receiver requires exactly the next one, which rejects replayed, dropped or
// reordered frames (and is the nonce once frames are sealed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tessera {

constexpr uint32_t kFrameMagic = 0x41525354;  // "TSRA" in little-endian byte order
// The frame layout's version (what every frame's header says). The messages
// inside have their own version, exchanged in the hello with the release
// (cluster/session/session_messages.h: kProtocolVersion).
constexpr uint16_t kFrameVersion = 2;  // 2: tensor-parallel ranks exchange partials directly
constexpr size_t kFrameHeaderBytes = 24;

struct FrameHeader {
    uint32_t magic = kFrameMagic;
    uint16_t version = kFrameVersion;
    uint16_t type = 0;
    uint64_t sequence = 0;
    uint32_t length = 0;  // payload bytes that follow the header
    uint32_t flags = 0;   // bit 0: sealed (authenticated encryption)
};

using FrameHeaderBytes = std::array<uint8_t, kFrameHeaderBytes>;

FrameHeaderBytes encode_frame_header(const FrameHeader& header);

// Decodes and validates a header: magic, version, and length <= max_payload.
// `peer` names the other end in the error message.
FrameHeader decode_frame_header(const FrameHeaderBytes& bytes, uint32_t max_payload, const char* peer);

}  // namespace tessera
