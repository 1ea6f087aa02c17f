// Scalar reference kernels for the K-quant types: Q2_K, Q3_K, Q4_K, Q5_K and
// Q6_K weights, Q8_K activations. Quantizers follow llama.cpp's reference ones (scale searches
// included), so a tensor quantized here decodes like one from llama-quantize.
// They are registered in scalar_traits (quant_scalar.cpp); SIMD kernels are
// tested against them. n is always a multiple of 256; buffers may be unaligned.
#pragma once

#include <cstdint>

namespace tessera {

void q4_k_to_float(const void* src, float* dst, int64_t n);
void q4_k_from_float(const float* src, void* dst, int64_t n);
// Q4_K row . Q8_K row.
float q4_k_vec_dot(int64_t n, const void* w, const void* x);

void q6_k_to_float(const void* src, float* dst, int64_t n);
void q6_k_from_float(const float* src, void* dst, int64_t n);
// Q6_K row . Q8_K row.
float q6_k_vec_dot(int64_t n, const void* w, const void* x);
// One super-block of it in the canonical order: acc + its contribution.
struct BlockQ6_K;
struct BlockQ8_K;
float q6_k_block_step(const BlockQ6_K& w, const BlockQ8_K& x, float acc);

// Q5_K, Q2_K and Q3_K (kquant_low_scalar.cpp), against Q8_K rows.
void q5_k_to_float(const void* src, float* dst, int64_t n);
void q5_k_from_float(const float* src, void* dst, int64_t n);
float q5_k_vec_dot(int64_t n, const void* w, const void* x);
struct BlockQ5_K;
float q5_k_block_step(const BlockQ5_K& w, const BlockQ8_K& x, float acc);

void q2_k_to_float(const void* src, float* dst, int64_t n);
void q2_k_from_float(const float* src, void* dst, int64_t n);
float q2_k_vec_dot(int64_t n, const void* w, const void* x);
struct BlockQ2_K;
float q2_k_block_step(const BlockQ2_K& w, const BlockQ8_K& x, float acc);

void q3_k_to_float(const void* src, float* dst, int64_t n);
void q3_k_from_float(const float* src, void* dst, int64_t n);
float q3_k_vec_dot(int64_t n, const void* w, const void* x);
struct BlockQ3_K;
float q3_k_block_step(const BlockQ3_K& w, const BlockQ8_K& x, float acc);

// The scale search Q4_K's and Q5_K's quantizers share (llama.cpp's
// reference): per sub-block of 32, codes L in [0, nmax] and a scale and min
// (make_qkx2_quants from rmin over nstep + 1 tries), the 8 scales and mins
// packed as 6-bit multiples of fp16 d and dmin into `scales` (12 bytes), and
// L requantized against them as stored. With `importance` (this
// super-block's 256 values of llama.cpp's importance matrix) the weighted
// search of quantize_row_q4_K_impl / q5_K_impl instead.
void k_scale_min_quants(const float* x, int nmax, float rmin, int nstep, const float* importance, uint8_t* scales,
                        uint16_t* d, uint16_t* dmin, uint8_t* L);

// The quantizers with an importance matrix (one value per column of the row
// of n; nullptr: as from_float), as llama.cpp's quantize_q*_K.
void q2_k_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q3_k_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q4_k_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q5_k_quantize(const float* src, void* dst, int64_t n, const float* importance);
void q6_k_quantize(const float* src, void* dst, int64_t n, const float* importance);

void q8_k_to_float(const void* src, float* dst, int64_t n);
void q8_k_from_float(const float* src, void* dst, int64_t n);

}  // namespace tessera
