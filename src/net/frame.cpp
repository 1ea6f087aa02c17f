#include "net/frame.h"

#include "util/error.h"
#include "util/version.h"

namespace tessera {

namespace {
void put_le(uint8_t* p, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}
}  // namespace

FrameHeaderBytes encode_frame_header(const FrameHeader& h) {
    FrameHeaderBytes b{};
    put_le(b.data() + 0, h.magic, 4);
    put_le(b.data() + 4, h.version, 2);
    put_le(b.data() + 6, h.type, 2);
    put_le(b.data() + 8, h.sequence, 8);
    put_le(b.data() + 16, h.length, 4);
    put_le(b.data() + 20, h.flags, 4);
    return b;
}

FrameHeader decode_frame_header(const FrameHeaderBytes& b, uint32_t max_payload, const char* peer) {
    FrameHeader h;
    h.magic = static_cast<uint32_t>(get_le(b.data() + 0, 4));
    h.version = static_cast<uint16_t>(get_le(b.data() + 4, 2));
    h.type = static_cast<uint16_t>(get_le(b.data() + 6, 2));
    h.sequence = get_le(b.data() + 8, 8);
    h.length = static_cast<uint32_t>(get_le(b.data() + 16, 4));
    h.flags = static_cast<uint32_t>(get_le(b.data() + 20, 4));
    if (h.magic != kFrameMagic) {
        throw make_error("{}: not a tessera peer (bad frame magic {:#010x})", peer, h.magic);
    }
    if (h.version != kFrameVersion) {
        throw make_error("{}: sends frames of version {}, and this tessera {} frames of version {}: run the same "
                         "tessera release on both ends", peer, h.version, tessera_version(), kFrameVersion);
    }
    if (h.length > max_payload) {
        throw make_error("{}: frame of {} bytes exceeds the limit of {} bytes", peer, h.length, max_payload);
    }
    return h;
}

}  // namespace tessera
