// Scalar references of the 32-element block types beyond Q4_0/Q8_0: Q4_1,
// Q5_0, Q5_1 and MXFP4 (weights against Q8_0 activations; IQ4_NL is iq4_scalar.h's),
// and of BF16. Quantizers are llama.cpp's (quantize_q4_1 / q5_0 / q5_1 / mxfp4 without
// an importance matrix): the same bytes as llama-quantize.
//
// Their dot products run in the canonical order (ops/row_groups.h), the
// same code on every CPU, so a row gives the same bits on every node:
//   Q5_0, MXFP4 (and IQ4_NL): s = sum of the block's integer products (exact),
//       acc = fma(float(s), d_w * d_x, acc)
//   Q4_1, Q5_1: s = sum q_i x_i, t = sum x_i (exact integers),
//       acc = fma(d_x, fma(m_w, float(t), d_w * float(s)), acc)
// BF16 takes float activations in float_canonical.h's order.
#pragma once

#include <cstdint>

namespace tessera {

struct BlockQ8_0;

void q4_1_to_float(const void* src, float* dst, int64_t n);
void q4_1_from_float(const float* src, void* dst, int64_t n);
float q4_1_vec_dot(int64_t n, const void* w, const void* x);
struct BlockQ4_1;
float q4_1_block_step(const BlockQ4_1& w, const BlockQ8_0& x, float acc);

void q5_0_to_float(const void* src, float* dst, int64_t n);
void q5_0_from_float(const float* src, void* dst, int64_t n);
float q5_0_vec_dot(int64_t n, const void* w, const void* x);

void q5_1_to_float(const void* src, float* dst, int64_t n);
void q5_1_from_float(const float* src, void* dst, int64_t n);
// With an importance matrix (n values, one per column, for a whole row of n:
// llama.cpp weighs by the row's mean square; nullptr: as from_float, but
// Q4_0's must have one), as llama.cpp's quantize_q4_0 / q5_0 / q5_1 given one.
void q4_0_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q4_1_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q5_0_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q5_1_quantize(const float* src, void* dst, int64_t n, const float* importance);
float q5_1_vec_dot(int64_t n, const void* w, const void* x);

void mxfp4_to_float(const void* src, float* dst, int64_t n);
void mxfp4_from_float(const float* src, void* dst, int64_t n);
float mxfp4_vec_dot(int64_t n, const void* w, const void* x);

// One block of each in the canonical order: acc + its contribution.
struct BlockQ5_0;
struct BlockQ5_1;
struct BlockMXFP4;
struct BlockQ8_0;
float q5_0_block_step(const BlockQ5_0& w, const BlockQ8_0& x, float acc);
float q5_1_block_step(const BlockQ5_1& w, const BlockQ8_0& x, float acc);
float mxfp4_block_step(const BlockMXFP4& w, const BlockQ8_0& x, float acc);

void bf16_to_float(const void* src, float* dst, int64_t n);
// Round to nearest even, NaNs kept quiet (llama.cpp's ggml_fp32_to_bf16).
void bf16_from_float(const float* src, void* dst, int64_t n);
// x: BF16 activations (ops/float_canonical.h's pairs).
float bf16_vec_dot(int64_t n, const void* w, const void* x);
// x: F32 activations (BF16_F32ACT: each weight widened, then f32_dot_canonical).
float bf16_f32_vec_dot(int64_t n, const void* w, const void* x);

}  // namespace tessera
