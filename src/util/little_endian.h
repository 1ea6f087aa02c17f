// Little-endian integers in byte buffers: the wire's frame headers, step
// messages and discovery packets, the same bytes on every CPU.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

// The low `bytes` bytes of v at p, lowest first.
inline void store_le(uint8_t* p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void append_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline uint64_t load_le(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

inline void store_u32(uint8_t* p, uint32_t v) { store_le(p, v, 4); }
inline void append_u32(std::vector<uint8_t>& out, uint32_t v) { append_le(out, v, 4); }
inline uint32_t load_u32(const uint8_t* p) { return static_cast<uint32_t>(load_le(p, 4)); }

}  // namespace tessera
