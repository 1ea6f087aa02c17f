#include "net/frame.h"

#include "util/error.h"
#include "util/little_endian.h"
#include "util/version.h"

namespace tessera {

FrameHeaderBytes encode_frame_header(const FrameHeader& h) {
    FrameHeaderBytes b{};
    store_le(b.data() + 0, h.magic, 4);
    store_le(b.data() + 4, h.version, 2);
    store_le(b.data() + 6, h.type, 2);
    store_le(b.data() + 8, h.sequence, 8);
    store_le(b.data() + 16, h.length, 4);
    store_le(b.data() + 20, h.flags, 4);
    return b;
}

FrameHeader decode_frame_header(const FrameHeaderBytes& b, uint32_t max_payload, const char* peer) {
    FrameHeader h;
    h.magic = static_cast<uint32_t>(load_le(b.data() + 0, 4));
    h.version = static_cast<uint16_t>(load_le(b.data() + 4, 2));
    h.type = static_cast<uint16_t>(load_le(b.data() + 6, 2));
    h.sequence = load_le(b.data() + 8, 8);
    h.length = static_cast<uint32_t>(load_le(b.data() + 16, 4));
    h.flags = static_cast<uint32_t>(load_le(b.data() + 20, 4));
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
