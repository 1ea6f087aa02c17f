// Scalar reference of Q2_0, llama.cpp's 2-bit type (ggml's block_q2_0: 64
// codes q in [0, 4) standing for q - 1 and one fp16 scale, 2.25 bits a
// weight), against Q8_0 activations. The quantizer is llama.cpp's
// quantize_row_q2_0_ref: the same bytes as llama-quantize (which ignores an
// importance matrix for this type).
//
// The dot product runs in the canonical order (ops/row_groups.h), per Q8_0
// block h (h < 2, elements 32h..32h + 31) of a Q2_0 block:
//   s   = sum over the 32 elements of (q - 1) x   (an exact integer)
//   acc = fma(float(s), d_w * d_x(h), acc)
#pragma once

#include "ops/quant_blocks.h"

#include <cstdint>

namespace tessera {

inline constexpr int kQ2_0Block = 64;

// Element i's code (q, before the - 1) of a Q2_0 block's bytes.
inline int q2_0_code(const uint8_t* qs, int i) { return (qs[i / 4] >> (2 * (i % 4))) & 3; }

void q2_0_to_float(const void* src, float* dst, int64_t n);
void q2_0_from_float(const float* src, void* dst, int64_t n);
float q2_0_vec_dot(int64_t n, const void* w, const void* x);
float q2_0_block_step(const BlockQ2_0& w, const Q8_0x2& x, float acc);

}  // namespace tessera
