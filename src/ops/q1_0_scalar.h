// Scalar reference of Q1_0, the 1-bit type of llama.cpp (ggml's
// block_q1_0: 128 signs and one fp16 scale, 1.125 bits a weight; the type of
// PrismML's Bonsai files), against Q8_0 activations. The quantizer is
// llama.cpp's quantize_row_q1_0_ref: the same bytes as llama-quantize.
//
// The dot product runs in the canonical order (ops/row_groups.h), per Q8_0
// block k (k < 4) of a Q1_0 block:
//   s   = sum over the 32 elements of (bit ? x : -x)   (an exact integer)
//   acc = fma(float(s), d_w * d_x(k), acc)
#pragma once

#include "ops/quant_blocks.h"

#include <cstdint>

namespace tessera {

inline constexpr int kQ1_0Block = 128;

void q1_0_to_float(const void* src, float* dst, int64_t n);
void q1_0_from_float(const float* src, void* dst, int64_t n);
float q1_0_vec_dot(int64_t n, const void* w, const void* x);
float q1_0_block_step(const BlockQ1_0& w, const Q8_0x4& x, float acc);

}  // namespace tessera
