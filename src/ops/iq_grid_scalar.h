// Scalar references of the grid I-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M) against Q8_K activations: dequantization as ggml's
// (bit for bit), quantization as llama.cpp's quantize_iq*
// (ops/iq_grid_quantize.cpp, ops/iq1_quantize.cpp), and the dot product in
// the canonical order:
//   S = sum_j (2 s_j + 1) sum_i point_i * sign_i * y_i   (exact integers,
//       j over the block's scale groups; IQ1: 8 point_i + shift_j for
//       point_i * sign_i, ops/iq_grid_decode.h), then
//   acc = fma(d_x, d_w * (k * float(S)), acc)
// with k = 1/8 (IQ1, IQ2), 1/4 (IQ3_XXS), 1 (IQ3_S): a power of two, exact.
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera {

struct BlockIQ2_XXS;
struct BlockIQ2_XS;
struct BlockIQ2_S;
struct BlockIQ3_XXS;
struct BlockIQ3_S;
struct BlockIQ1_S;
struct BlockIQ1_M;
struct BlockQ8_K;

void iq2_xxs_to_float(const void* src, float* dst, int64_t n);
void iq2_xs_to_float(const void* src, float* dst, int64_t n);
void iq2_s_to_float(const void* src, float* dst, int64_t n);
void iq3_xxs_to_float(const void* src, float* dst, int64_t n);
void iq3_s_to_float(const void* src, float* dst, int64_t n);
void iq1_s_to_float(const void* src, float* dst, int64_t n);
void iq1_m_to_float(const void* src, float* dst, int64_t n);

float iq2_xxs_block_step(const BlockIQ2_XXS& w, const BlockQ8_K& x, float acc);
float iq2_xs_block_step(const BlockIQ2_XS& w, const BlockQ8_K& x, float acc);
float iq2_s_block_step(const BlockIQ2_S& w, const BlockQ8_K& x, float acc);
float iq3_xxs_block_step(const BlockIQ3_XXS& w, const BlockQ8_K& x, float acc);
float iq3_s_block_step(const BlockIQ3_S& w, const BlockQ8_K& x, float acc);
float iq1_s_block_step(const BlockIQ1_S& w, const BlockQ8_K& x, float acc);
float iq1_m_block_step(const BlockIQ1_M& w, const BlockQ8_K& x, float acc);

float iq2_xxs_vec_dot(int64_t n, const void* w, const void* x);
float iq2_xs_vec_dot(int64_t n, const void* w, const void* x);
float iq2_s_vec_dot(int64_t n, const void* w, const void* x);
float iq3_xxs_vec_dot(int64_t n, const void* w, const void* x);
float iq3_s_vec_dot(int64_t n, const void* w, const void* x);
float iq1_s_vec_dot(int64_t n, const void* w, const void* x);
float iq1_m_vec_dot(int64_t n, const void* w, const void* x);

// Quantizers (llama.cpp's quantize_iq*). `importance` is one value per
// column of a row of n (llama.cpp's importance matrix), or nullptr: then
// IQ3_XXS, IQ3_S and IQ2_S weigh as llama.cpp does without one, and IQ2_XXS
// and IQ2_XS (which llama.cpp refuses to make without one) weigh every
// column 1.
void iq2_xxs_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq2_xs_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq2_s_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq3_xxs_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq3_s_quantize(const float* src, void* dst, int64_t n, const float* importance);

void iq2_xxs_from_float(const float* src, void* dst, int64_t n);
void iq2_xs_from_float(const float* src, void* dst, int64_t n);
void iq2_s_from_float(const float* src, void* dst, int64_t n);
void iq3_xxs_from_float(const float* src, void* dst, int64_t n);
void iq3_s_from_float(const float* src, void* dst, int64_t n);

// IQ1 (llama.cpp's quantize_iq1_s / quantize_iq1_m, ops/iq1_quantize.cpp).
// llama.cpp makes IQ1_S only with an importance matrix; without one every
// column weighs 1 here. IQ1_M without one weighs each value by its square,
// as llama.cpp does.
void iq1_s_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq1_m_quantize(const float* src, void* dst, int64_t n, const float* importance);
void iq1_s_from_float(const float* src, void* dst, int64_t n);
void iq1_m_from_float(const float* src, void* dst, int64_t n);

// The float half of every grid type's step: k is the type's power of two.
inline float iq_grid_step(float d_x, float d_w, float k, int32_t s, float acc) {
    return std::fma(d_x, d_w * (k * static_cast<float>(s)), acc);
}

}  // namespace tessera
