// Scalar reference of the ternary types of llama.cpp (BitNet b1.58 and
// TriLM files; kquant_blocks.h): TQ2_0 (2 bits a weight, 2.06 with its
// scale) and TQ1_0 (5 trits a byte, 1.69 bits a weight), 256 elements a
// block, against Q8_K activations. The quantizers are llama.cpp's
// quantize_row_tq2_0_ref and quantize_row_tq1_0_ref: the same bytes as
// llama-quantize (which ignores an importance matrix for these types).
//
// The dot product runs in the canonical order (ops/row_groups.h), per block:
//   s   = sum over the 256 elements of (q - 1) x   (an exact integer)
//   acc = fma(float(s), d_w * d_x, acc)
#pragma once

#include "ops/kquant_blocks.h"

#include <cstdint>

namespace tessera {

// Code (0, 1 or 2; q - 1 the value) of element i of a TQ2_0 / TQ1_0 block.
inline int tq2_0_code(const BlockTQ2_0& b, int i) { return (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }
inline int trit_of(uint8_t byte, int l) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const auto q = static_cast<uint8_t>(byte * kPow3[l]);
    return (q * 3) >> 8;
}
inline int tq1_0_code(const BlockTQ1_0& b, int i) {
    if (i < 160) return trit_of(b.qs[i % 32], i / 32);
    if (i < 240) return trit_of(b.qs[32 + (i - 160) % 16], (i - 160) / 16);
    return trit_of(b.qh[(i - 240) % 4], (i - 240) / 4);
}

void tq2_0_to_float(const void* src, float* dst, int64_t n);
void tq2_0_from_float(const float* src, void* dst, int64_t n);
float tq2_0_vec_dot(int64_t n, const void* w, const void* x);
float tq2_0_block_step(const BlockTQ2_0& w, const BlockQ8_K& x, float acc);

void tq1_0_to_float(const void* src, float* dst, int64_t n);
void tq1_0_from_float(const float* src, void* dst, int64_t n);
float tq1_0_vec_dot(int64_t n, const void* w, const void* x);
float tq1_0_block_step(const BlockTQ1_0& w, const BlockQ8_K& x, float acc);

}  // namespace tessera
