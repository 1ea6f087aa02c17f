// What every target's grouped Q4_K kernel shares: the offsets of a group's
// super-block (ops/row_groups.h) and of a Q8_K block. (The loop over a
// product's groups and tiles of columns is ops/group_tiles.h's.)
#pragma once

#include <cstdint>

namespace tessera::q4k_group {

// A group's super-block: fp16 d, fp16 dmin, unpacked scales and mins, codes.
inline constexpr int64_t kBlockBytes = 2368, kDmin = 32, kScales = 64, kMins = 192, kQs = 320;
// A Q8_K block: float d, int8 qs[256], int16 bsums[16].
inline constexpr int64_t kQ8KBytes = 292, kQ8KQs = 4, kQ8KBsums = 260;

}  // namespace tessera::q4k_group

// A group's Q6_K super-block (ops/row_groups.h): fp16 d, int8 scales, then 4
// chunks of 64 elements, each 8 vectors of low nibbles and 4 of high bits.
namespace tessera::q6k_group {

inline constexpr int64_t kBlockBytes = 3360, kScales = 32, kQs = 288, kChunkBytes = 768, kHighs = 512;

}  // namespace tessera::q6k_group

// A group's Q5_K super-block: Q4_K's (fp16 d, fp16 dmin, unpacked scales and
// mins), then 4 chunks of 64 elements, each Q4_K's 8 vectors of nibbles and
// 2 vectors of fifth bits.
namespace tessera::q5k_group {

inline constexpr int64_t kBlockBytes = 2880, kDmin = 32, kScales = 64, kMins = 192, kQs = 320, kChunkBytes = 640,
                         kHighs = 512;

}  // namespace tessera::q5k_group

// A group's IQ4_XS super-block: fp16 d, 6-bit sub-block scales s (the
// factor is s - 32; a zero padding row stays zero bytes) a byte each, and
// Q4_K's 4 chunks of 8 vectors of 4-bit grid indices.
namespace tessera::iq4xs_group {

inline constexpr int64_t kBlockBytes = 2208, kScales = 32, kQs = 160;

// kIq4nlValues + 128: the grid as the unsigned operand of a byte dot product.
alignas(16) inline constexpr uint8_t kIq4GridPlus128[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                            129, 141, 153, 166, 181, 197, 217, 241};

}  // namespace tessera::iq4xs_group

// A group's Q2_K and Q3_K super-blocks: 4 chunks of 64 elements (sub-blocks
// 4h .. 4h + 3 of 16); vector m (m < 4) of chunk h holds row r's 4 bytes at
// 4r, bits 2t, 2t + 1 of byte i the low 2 bits of element 64h + 16t + 4m + i.
//   Q2_K: fp16 d, fp16 dmin, byte (scale | min << 4) of sub-block j of row r
//         at kScales + 16j + r, chunks of 256 bytes at kQs.
//   Q3_K: fp16 d, 6-bit scale s (the factor is s - 32) of sub-block j of row
//         r at kScales + 16j + r, chunks of 384 bytes at kQs: the 4 vectors,
//         then 2 vectors of third bits (vector n's byte i at 4r, bit b: that
//         of step m = (8n + b) / 4, t = (8n + b) % 4).
namespace tessera::q2k_group {

inline constexpr int64_t kBlockBytes = 1344, kDmin = 32, kScales = 64, kQs = 320, kChunkBytes = 256;

}  // namespace tessera::q2k_group

namespace tessera::q3k_group {

inline constexpr int64_t kBlockBytes = 1824, kScales = 32, kQs = 288, kChunkBytes = 384, kHighs = 256;

}  // namespace tessera::q3k_group
