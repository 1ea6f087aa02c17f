// Scalar dequantization and dot products of the grid I-quants and IQ1
// (iq_grid_scalar.h), through the decoder every kernel shares
// (iq_grid_decode.h); the quantizers are in iq_grid_quantize.cpp.
#include "ops/iq_grid_scalar.h"

#include "ops/block_io.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grid_decode.h"
#include "util/fp16.h"

namespace tessera {

namespace {

// The factor a sub-block's weights dequantize with, as ggml computes it
// from d and the 4-bit scale s (odd = 2 s + 1).
template <QuantType kType>
float dequant_factor(float d, int odd) {
    const auto s = static_cast<float>((odd - 1) / 2);
    if constexpr (kType == QuantType::IQ3_S) return d * static_cast<float>(odd);
    else if constexpr (kType == QuantType::IQ3_XXS) return d * (0.5f + s) * 0.5f;
    else return d * (0.5f + s) * 0.25f;
}

template <QuantType kType, typename Block>
void to_float_rows(const void* src, float* dst, int64_t n) {
    const IqTables t = iq_tables(kType);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const Block block = load_block<Block>(src, b);
        const auto* bytes = reinterpret_cast<const uint8_t*>(&block);
        const float d = fp16_to_fp32(block.d);
        float* y = dst + b * kQK_K;
        for (int j = 0; j < 8; ++j) {
            const IqSub32 s = iq_decode32<kType>(bytes, j, t);
            for (int l = 0; l < 4; ++l) {
                const float db = dequant_factor<kType>(d, l < 2 ? s.scale_lo : s.scale_hi);
                for (int i = 0; i < 8; ++i) {
                    const auto v = static_cast<float>((s.points[l] >> (8 * i)) & 0xFF);
                    y[32 * j + 8 * l + i] = db * v * ((s.signs[l] >> (8 * i)) & 1 ? -1.0f : 1.0f);
                }
            }
        }
    }
}

// IQ1: value = d * (2 s + 1) * (point + shift / 8), as ggml computes it (the
// factor first, then the shifted level).
template <QuantType kType, typename Block>
void iq1_to_float_rows(const void* src, float* dst, int64_t n) {
    const uint64_t* points = iq1_points();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const Block block = load_block<Block>(src, b);
        const auto* bytes = reinterpret_cast<const uint8_t*>(&block);
        const float d = fp16_to_fp32(iq1_block_d<kType>(bytes));
        float* y = dst + b * kQK_K;
        for (int j = 0; j < 8; ++j) {
            const Iq1Sub32 s = iq1_decode32<kType>(bytes, j, points);
            for (int l = 0; l < 4; ++l) {
                const float dl = d * static_cast<float>(s.scale[l]);
                const float delta = s.shift[l] < 0 ? -0.125f : 0.125f;
                for (int i = 0; i < 8; ++i) {
                    const auto v = static_cast<float>(static_cast<int8_t>((s.points[l] >> (8 * i)) & 0xFF));
                    y[32 * j + 8 * l + i] = dl * (v + delta);
                }
            }
        }
    }
}

template <QuantType kType, typename Block>
float block_step(const Block& w, const BlockQ8_K& x, float acc) {
    static const IqTables t = iq_tables(kType);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&w);
    const int32_t s = iq_block_sum<kType>(bytes, x.qs, t);
    return iq_grid_step(x.d, fp16_to_fp32(iq_block_d_of<kType>(bytes)), kIqStepFactor<kType>, s, acc);
}

}  // namespace

void iq2_xxs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<QuantType::IQ2_XXS, BlockIQ2_XXS>(src, dst, n); }
void iq2_xs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<QuantType::IQ2_XS, BlockIQ2_XS>(src, dst, n); }
void iq2_s_to_float(const void* src, float* dst, int64_t n) { to_float_rows<QuantType::IQ2_S, BlockIQ2_S>(src, dst, n); }
void iq3_xxs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<QuantType::IQ3_XXS, BlockIQ3_XXS>(src, dst, n); }
void iq3_s_to_float(const void* src, float* dst, int64_t n) { to_float_rows<QuantType::IQ3_S, BlockIQ3_S>(src, dst, n); }
void iq1_s_to_float(const void* src, float* dst, int64_t n) { iq1_to_float_rows<QuantType::IQ1_S, BlockIQ1_S>(src, dst, n); }
void iq1_m_to_float(const void* src, float* dst, int64_t n) { iq1_to_float_rows<QuantType::IQ1_M, BlockIQ1_M>(src, dst, n); }

float iq2_xxs_block_step(const BlockIQ2_XXS& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ2_XXS>(w, x, acc);
}
float iq2_xs_block_step(const BlockIQ2_XS& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ2_XS>(w, x, acc);
}
float iq2_s_block_step(const BlockIQ2_S& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ2_S>(w, x, acc);
}
float iq3_xxs_block_step(const BlockIQ3_XXS& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ3_XXS>(w, x, acc);
}
float iq3_s_block_step(const BlockIQ3_S& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ3_S>(w, x, acc);
}
float iq1_s_block_step(const BlockIQ1_S& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ1_S>(w, x, acc);
}
float iq1_m_block_step(const BlockIQ1_M& w, const BlockQ8_K& x, float acc) {
    return block_step<QuantType::IQ1_M>(w, x, acc);
}

float iq2_xxs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_XXS, BlockQ8_K, iq2_xxs_block_step>(n, kQK_K, w, x);
}
float iq2_xs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_XS, BlockQ8_K, iq2_xs_block_step>(n, kQK_K, w, x);
}
float iq2_s_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_S, BlockQ8_K, iq2_s_block_step>(n, kQK_K, w, x);
}
float iq3_xxs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ3_XXS, BlockQ8_K, iq3_xxs_block_step>(n, kQK_K, w, x);
}
float iq3_s_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ3_S, BlockQ8_K, iq3_s_block_step>(n, kQK_K, w, x);
}
float iq1_s_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ1_S, BlockQ8_K, iq1_s_block_step>(n, kQK_K, w, x);
}
float iq1_m_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ1_M, BlockQ8_K, iq1_m_block_step>(n, kQK_K, w, x);
}

}  // namespace tessera
