// Where things sit in a group block (16 rows, ops/row_groups.h) of the
// 32-element types beyond Q4_0/Q8_0. Every one keeps Q4_0's code order:
// vector k (k < 4) at kQs + 64k holds row r's 4 bytes at 4r, the low nibbles
// elements 4k + i, the high nibbles 16 + 4k + i. Q5_0 / Q5_1 add a vector of
// fifth bits at kHighs (row r's byte i: bit 2k that of element 4k + i, bit
// 2k + 1 that of 16 + 4k + i); IQ4_NL / MXFP4 codes are grid indices.
//   Q5_0   fp16 d at 0, codes at 32, fifth bits at 288           (352 bytes)
//   Q5_1   fp16 d at 0, fp16 m at 32, codes at 64, bits at 320  (384 bytes)
//   Q4_1   fp16 d at 0, fp16 m at 32, codes at 64                (320 bytes)
//   IQ4_NL fp16 d at 0, codes at 32                              (288 bytes)
//   MXFP4  the exponent byte e at r, codes at 16                 (272 bytes)
#pragma once

#include "ops/quant_type.h"

#include <cstdint>

namespace tessera::block32_group {

struct Layout {
    int64_t bytes;
    int64_t qs;
    int64_t highs;  // 0: none
    int64_t m;      // 0: none
};

inline constexpr Layout kQ5_0{352, 32, 288, 0};
inline constexpr Layout kQ5_1{384, 64, 320, 32};
inline constexpr Layout kQ4_1{320, 64, 0, 32};
inline constexpr Layout kIQ4_NL{288, 32, 0, 0};
inline constexpr Layout kMXFP4{272, 16, 0, 0};

// The grids + their offset, the unsigned operand of a byte dot product; the
// offset times the activations' block sum is taken off after.
alignas(16) inline constexpr uint8_t kIq4nlPlus128[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                          129, 141, 153, 166, 181, 197, 217, 241};
alignas(16) inline constexpr uint8_t kMxfp4Plus12[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

}  // namespace tessera::block32_group
