// Scalar references of the non-linear 4-bit types: IQ4_NL (blocks of 32,
// against Q8_0 activations) and IQ4_XS (super-blocks of 256 with 6-bit
// sub-block scales, against Q8_K). Quantizers are llama.cpp's quantize_iq4_nl
// / quantize_iq4_xs without an importance matrix (7 scale tries each side):
// the bytes llama-quantize writes.
//
// Canonical order (the same code on every CPU):
//   IQ4_NL: s = sum kIq4nlValues[q_i] x_i (exact), acc = fma(float(s), d_w * d_x, acc)
//   IQ4_XS: s = sum_j (s_j - 32) (v . y)_j (exact), acc = fma(d_x, d_w * float(s), acc)
#pragma once

#include <cstdint>

namespace tessera {

void iq4_nl_to_float(const void* src, float* dst, int64_t n);
void iq4_nl_from_float(const float* src, void* dst, int64_t n);
float iq4_nl_vec_dot(int64_t n, const void* w, const void* x);
struct BlockIQ4_NL;
struct BlockQ8_0;
float iq4_nl_block_step(const BlockIQ4_NL& w, const BlockQ8_0& x, float acc);

void iq4_xs_to_float(const void* src, float* dst, int64_t n);
void iq4_xs_from_float(const float* src, void* dst, int64_t n);
float iq4_xs_vec_dot(int64_t n, const void* w, const void* x);
// One super-block of it in the canonical order: acc + its contribution.
struct BlockIQ4_XS;
struct BlockQ8_K;
float iq4_xs_block_step(const BlockIQ4_XS& w, const BlockQ8_K& x, float acc);

// With an importance matrix (n values, one per column; nullptr: as
// from_float): llama.cpp's quantize_iq4_nl / quantize_iq4_xs given one.
void iq4_nl_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq4_xs_quantize(const float* src, void* dst, int64_t n, const float* importance);

}  // namespace tessera
