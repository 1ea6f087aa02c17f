// Scalar reference kernels for F32, F16, Q8_0 and Q4_0. Rounding follows
// llama.cpp's reference quantizers so a tensor quantized here has the same
// bytes as one quantized by llama.cpp. The other types' are in kquant_scalar,
// kquant_low_scalar, block32_scalar and iq4_scalar, listed in the same table.
#include "ops/block32_scalar.h"
#include "ops/iq4_scalar.h"
#include "ops/iq_grid_scalar.h"
#include "ops/kquant_scalar.h"
#include "ops/nvfp4_scalar.h"
#include "ops/q1_0_scalar.h"
#include "ops/q2_0_scalar.h"
#include "ops/ternary_scalar.h"
#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// Buffers may be unaligned (a row inside a file, a slice of a row), so every
// element and block is read and written through memcpy, never a cast.
template <typename T>
T load(const void* base, int64_t index) {
    T value;
    std::memcpy(&value, static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return value;
}

template <typename T>
void store(void* base, int64_t index, const T& value) {
    std::memcpy(static_cast<uint8_t*>(base) + index * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

void f32_to_float(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f32_from_float(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
float f32_vec_dot(int64_t n, const void* w, const void* x) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += load<float>(w, i) * load<float>(x, i);
    return sum;
}

void f16_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load<uint16_t>(src, i));
}
void f16_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, fp32_to_fp16(src[i]));
}
float f16_vec_dot(int64_t n, const void* w, const void* x) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(load<uint16_t>(w, i)) * load<float>(x, i);
    return sum;
}

void q8_0_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const auto block = load<BlockQ8_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQ8_0Block; ++i) dst[b * kQ8_0Block + i] = d * block.qs[i];
    }
}
void q8_0_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float* x = src + b * kQ8_0Block;
        float amax = 0.0f;
        for (int i = 0; i < kQ8_0Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_0 block{};
        block.d = fp32_to_fp16(d);
        for (int i = 0; i < kQ8_0Block; ++i) block.qs[i] = static_cast<int8_t>(std::round(x[i] * id));
        store(dst, b, block);
    }
}
// Q8_0 and Q4_0 rows against Q8_0 activations in the canonical order
// (ops/row_groups.h): per block in order, the exact integer sum, then
// acc = fma(float(s), d_w * d_x, acc). Every target's row kernels give these
// bits (attention over block keys rests on it).
float q8_0_vec_dot(int64_t n, const void* w, const void* x) {
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ8_0Block; ++k) {
        const auto a = load<BlockQ8_0>(w, k);
        const auto b = load<BlockQ8_0>(x, k);
        int32_t isum = 0;
        for (int i = 0; i < kQ8_0Block; ++i) isum += int32_t{a.qs[i]} * int32_t{b.qs[i]};
        sum = std::fma(static_cast<float>(isum), fp16_to_fp32(a.d) * fp16_to_fp32(b.d), sum);
    }
    return sum;
}

void q4_0_to_float(const void* src, float* dst, int64_t n) {
    constexpr int half = kQ4_0Block / 2;
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const auto block = load<BlockQ4_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < half; ++i) {
            dst[b * kQ4_0Block + i] = d * static_cast<float>((block.qs[i] & 0x0f) - 8);
            dst[b * kQ4_0Block + i + half] = d * static_cast<float>((block.qs[i] >> 4) - 8);
        }
    }
}
void q4_0_from_float(const float* src, void* dst, int64_t n) {
    constexpr int half = kQ4_0Block / 2;
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const float* x = src + b * kQ4_0Block;
        // The scale maps the element of largest magnitude, with its sign, to -8,
        // which uses the full asymmetric range [-8, 7].
        float amax = 0.0f;
        float max = 0.0f;
        for (int i = 0; i < kQ4_0Block; ++i) {
            if (std::fabs(x[i]) > amax) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ4_0 block{};
        block.d = fp32_to_fp16(d);
        for (int i = 0; i < half; ++i) {
            const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(x[i] * id + 8.5f)));
            const auto hi = static_cast<uint8_t>(std::min(15, static_cast<int>(x[i + half] * id + 8.5f)));
            block.qs[i] = static_cast<uint8_t>(lo | (hi << 4));
        }
        store(dst, b, block);
    }
}
float q4_0_vec_dot(int64_t n, const void* w, const void* x) {
    constexpr int half = kQ4_0Block / 2;
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ4_0Block; ++k) {
        const auto a = load<BlockQ4_0>(w, k);
        const auto b = load<BlockQ8_0>(x, k);
        int32_t isum = 0;
        for (int i = 0; i < half; ++i) {
            isum += ((a.qs[i] & 0x0f) - 8) * int32_t{b.qs[i]};
            isum += ((a.qs[i] >> 4) - 8) * int32_t{b.qs[i + half]};
        }
        sum = std::fma(static_cast<float>(isum), fp16_to_fp32(a.d) * fp16_to_fp32(b.d), sum);
    }
    return sum;
}

constexpr QuantTraits kScalarTraits[] = {
    {QuantType::F32, QuantType::F32, f32_to_float, f32_from_float, f32_vec_dot, vec_dot_tile_by_dots<f32_vec_dot>, nullptr},
    {QuantType::F16, QuantType::F32, f16_to_float, f16_from_float, f16_vec_dot, vec_dot_tile_by_dots<f16_vec_dot>, nullptr},
    {QuantType::Q8_0, QuantType::Q8_0, q8_0_to_float, q8_0_from_float, q8_0_vec_dot, vec_dot_tile_by_dots<q8_0_vec_dot>, nullptr},
    {QuantType::Q4_0, QuantType::Q8_0, q4_0_to_float, q4_0_from_float, q4_0_vec_dot, vec_dot_tile_by_dots<q4_0_vec_dot>, nullptr},
    // K-quants (kquant_scalar.cpp). Q8_K is only ever an activation: no vec_dot of its own.
    {QuantType::Q4_K, QuantType::Q8_K, q4_k_to_float, q4_k_from_float, q4_k_vec_dot, vec_dot_tile_by_dots<q4_k_vec_dot>, nullptr},
    {QuantType::Q6_K, QuantType::Q8_K, q6_k_to_float, q6_k_from_float, q6_k_vec_dot, vec_dot_tile_by_dots<q6_k_vec_dot>, nullptr},
    {QuantType::Q5_K, QuantType::Q8_K, q5_k_to_float, q5_k_from_float, q5_k_vec_dot, vec_dot_tile_by_dots<q5_k_vec_dot>, nullptr},
    {QuantType::Q3_K, QuantType::Q8_K, q3_k_to_float, q3_k_from_float, q3_k_vec_dot, vec_dot_tile_by_dots<q3_k_vec_dot>, nullptr},
    {QuantType::Q2_K, QuantType::Q8_K, q2_k_to_float, q2_k_from_float, q2_k_vec_dot, vec_dot_tile_by_dots<q2_k_vec_dot>, nullptr},
    {QuantType::Q8_K, QuantType::Q8_K, q8_k_to_float, q8_k_from_float, nullptr, nullptr, nullptr},
    // The other 32-element blocks (block32_scalar.cpp) and the non-linear 4-bit types (iq4_scalar.cpp).
    {QuantType::Q4_1, QuantType::Q8_0, q4_1_to_float, q4_1_from_float, q4_1_vec_dot, vec_dot_tile_by_dots<q4_1_vec_dot>, nullptr},
    {QuantType::Q5_0, QuantType::Q8_0, q5_0_to_float, q5_0_from_float, q5_0_vec_dot, vec_dot_tile_by_dots<q5_0_vec_dot>, nullptr},
    {QuantType::Q5_1, QuantType::Q8_0, q5_1_to_float, q5_1_from_float, q5_1_vec_dot, vec_dot_tile_by_dots<q5_1_vec_dot>, nullptr},
    {QuantType::IQ4_NL, QuantType::Q8_0, iq4_nl_to_float, iq4_nl_from_float, iq4_nl_vec_dot, vec_dot_tile_by_dots<iq4_nl_vec_dot>, nullptr},
    {QuantType::MXFP4, QuantType::Q8_0, mxfp4_to_float, mxfp4_from_float, mxfp4_vec_dot, vec_dot_tile_by_dots<mxfp4_vec_dot>, nullptr},
    {QuantType::IQ4_XS, QuantType::Q8_K, iq4_xs_to_float, iq4_xs_from_float, iq4_xs_vec_dot, vec_dot_tile_by_dots<iq4_xs_vec_dot>, nullptr},
    // The grid I-quants (iq_grid_scalar.cpp).
    {QuantType::IQ2_XXS, QuantType::Q8_K, iq2_xxs_to_float, iq2_xxs_from_float, iq2_xxs_vec_dot, vec_dot_tile_by_dots<iq2_xxs_vec_dot>, nullptr},
    {QuantType::IQ2_XS, QuantType::Q8_K, iq2_xs_to_float, iq2_xs_from_float, iq2_xs_vec_dot, vec_dot_tile_by_dots<iq2_xs_vec_dot>, nullptr},
    {QuantType::IQ2_S, QuantType::Q8_K, iq2_s_to_float, iq2_s_from_float, iq2_s_vec_dot, vec_dot_tile_by_dots<iq2_s_vec_dot>, nullptr},
    {QuantType::IQ3_XXS, QuantType::Q8_K, iq3_xxs_to_float, iq3_xxs_from_float, iq3_xxs_vec_dot, vec_dot_tile_by_dots<iq3_xxs_vec_dot>, nullptr},
    {QuantType::IQ3_S, QuantType::Q8_K, iq3_s_to_float, iq3_s_from_float, iq3_s_vec_dot, vec_dot_tile_by_dots<iq3_s_vec_dot>, nullptr},
    {QuantType::IQ1_S, QuantType::Q8_K, iq1_s_to_float, iq1_s_from_float, iq1_s_vec_dot, vec_dot_tile_by_dots<iq1_s_vec_dot>, nullptr},
    {QuantType::IQ1_M, QuantType::Q8_K, iq1_m_to_float, iq1_m_from_float, iq1_m_vec_dot, vec_dot_tile_by_dots<iq1_m_vec_dot>, nullptr},
    // The 1-bit and 2-bit types (q1_0_scalar.cpp, q2_0_scalar.cpp).
    {QuantType::Q1_0, QuantType::Q8_0, q1_0_to_float, q1_0_from_float, q1_0_vec_dot, vec_dot_tile_by_dots<q1_0_vec_dot>, nullptr},
    {QuantType::Q2_0, QuantType::Q8_0, q2_0_to_float, q2_0_from_float, q2_0_vec_dot, vec_dot_tile_by_dots<q2_0_vec_dot>, nullptr},
    // The ternary types (ternary_scalar.cpp).
    {QuantType::TQ2_0, QuantType::Q8_K, tq2_0_to_float, tq2_0_from_float, tq2_0_vec_dot, vec_dot_tile_by_dots<tq2_0_vec_dot>, nullptr},
    {QuantType::TQ1_0, QuantType::Q8_K, tq1_0_to_float, tq1_0_from_float, tq1_0_vec_dot, vec_dot_tile_by_dots<tq1_0_vec_dot>, nullptr},
    // NVIDIA's 4-bit floats (nvfp4_scalar.cpp).
    {QuantType::NVFP4, QuantType::Q8_0, nvfp4_to_float, nvfp4_from_float, nvfp4_vec_dot, vec_dot_tile_by_dots<nvfp4_vec_dot>, nullptr},
    // BF16 takes BF16 activations, as ggml's does (ops/float_canonical.h); a
    // router narrowed to BF16 keeps its F32 ones.
    {QuantType::BF16, QuantType::BF16, bf16_to_float, bf16_from_float, bf16_vec_dot, vec_dot_tile_by_dots<bf16_vec_dot>, nullptr},
    {QuantType::BF16_F32ACT, QuantType::F32, bf16_to_float, bf16_from_float, bf16_f32_vec_dot, vec_dot_tile_by_dots<bf16_f32_vec_dot>, nullptr},
};

}  // namespace

const QuantTraits* scalar_traits(QuantType type) {
    for (const auto& traits : kScalarTraits) {
        if (traits.type == type) return &traits;
    }
    return nullptr;
}

}  // namespace tessera
