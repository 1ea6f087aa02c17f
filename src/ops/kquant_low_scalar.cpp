// Scalar references of Q2_K, Q3_K and Q5_K (kquant_scalar.h): llama.cpp's
// reference quantizers (quantize_row_q2_K_ref / q3_K_ref / q5_K_ref), and
// dot products with Q8_K activations in the canonical order
// (ops/row_groups.h).
#include "ops/block_io.h"
#include "ops/kquant_blocks.h"
#include "ops/kquant_scalar.h"
#include "ops/quant_search.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

using quant_search::nearest_int;

// The 2-bit code of element i of a Q2_K / Q3_K block's qs (see BlockQ2_K).
int low2_code(const uint8_t* qs, int i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

void pack_low2(const uint8_t* L, uint8_t* qs) {
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t* Lh = L + 128 * h;
            qs[32 * h + l] = static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
        }
    }
}

// The signed 3-bit code (-4..3) of element i of a Q3_K block.
int q3_code(const BlockQ3_K& block, int i) {
    const bool high = (block.hmask[i % 32] >> (i / 32)) & 1;
    return low2_code(block.qs, i) - (high ? 0 : 4);
}

}  // namespace

// --- Q2_K -------------------------------------------------------------------

void q2_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ2_K>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        for (int i = 0; i < kQK_K; ++i) {
            const uint8_t sc = block.scales[i / 16];
            const float dl = d * static_cast<float>(sc & 0xF);
            const float ml = dmin * static_cast<float>(sc >> 4);
            dst[b * kQK_K + i] = dl * static_cast<float>(low2_code(block.qs, i)) - ml;
        }
    }
}

void q2_k_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    constexpr int kSubs = kQK_K / 16;
    constexpr float kScaleMax = 15.0f;  // scales and mins are 4-bit multiples of d and dmin
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        uint8_t L[kQK_K];
        uint8_t Laux[16];
        float weights[16];
        float scales[kSubs], mins[kSubs];
        BlockQ2_K block{};
        if (importance != nullptr) {
            // quantize_row_q2_K_impl: weights from the importance and the
            // block's spread, then the 4-bit scales and mins fitted by
            // weighted least squares (make_qp_quants) rather than scaled to
            // the largest.
            const float* qw_block = importance + b * kQK_K;
            float sumx2 = 0.0f;
            for (int i = 0; i < kQK_K; ++i) sumx2 += x[i] * x[i];
            const float sigma2 = sumx2 / kQK_K;
            float sw[kSubs] = {};
            for (int j = 0; j < kSubs; ++j) {
                for (int l = 0; l < 16; ++l) weights[l] = qw_block[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
                for (int l = 0; l < 16; ++l) sw[j] += weights[l];
                scales[j] = quant_search::make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.9f,
                                                           0.05f, 36, false);
            }
            uint8_t Ls[kSubs], Lm[kSubs];
            block.d = fp32_to_fp16(quant_search::make_qp_quants(kSubs, 15, scales, Ls, sw));
            block.dmin = fp32_to_fp16(quant_search::make_qp_quants(kSubs, 15, mins, Lm, sw));
            for (int j = 0; j < kSubs; ++j) block.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
        } else {
            float max_scale = 0.0f, max_min = 0.0f;
            for (int j = 0; j < kSubs; ++j) {
                for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
                scales[j] = quant_search::make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                                           0.1f, 15, true);
                max_scale = std::max(max_scale, scales[j]);
                max_min = std::max(max_min, mins[j]);
            }
            if (max_scale > 0) {
                const float iscale = kScaleMax / max_scale;
                for (int j = 0; j < kSubs; ++j) block.scales[j] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * scales[j]), 0, 15));
                block.d = fp32_to_fp16(max_scale / kScaleMax);
            } else {
                block.d = fp32_to_fp16(0.0f);
            }
            if (max_min > 0) {
                const float iscale = kScaleMax / max_min;
                for (int j = 0; j < kSubs; ++j) block.scales[j] |= static_cast<uint8_t>(std::clamp(nearest_int(iscale * mins[j]), 0, 15) << 4);
                block.dmin = fp32_to_fp16(max_min / kScaleMax);
            } else {
                block.dmin = fp32_to_fp16(0.0f);
            }
        }
        // Requantize against the scales as stored.
        for (int j = 0; j < kSubs; ++j) {
            const float d = fp16_to_fp32(block.d) * static_cast<float>(block.scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = fp16_to_fp32(block.dmin) * static_cast<float>(block.scales[j] >> 4);
            for (int l = 0; l < 16; ++l) L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + l] + dm) / d), 0, 3));
        }
        pack_low2(L, block.qs);
        store_block(dst, b, block);
    }
}

void q2_k_from_float(const float* src, void* dst, int64_t n) { q2_k_quantize(src, dst, n, nullptr); }

float q2_k_block_step(const BlockQ2_K& wb, const BlockQ8_K& xb, float acc) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) s += low2_code(wb.qs, 16 * j + l) * int32_t{xb.qs[16 * j + l]};
        scaled += (wb.scales[j] & 0xF) * s;
        mins += (wb.scales[j] >> 4) * int32_t{xb.bsums[j]};
    }
    const float block = std::fma(-fp16_to_fp32(wb.dmin), static_cast<float>(mins), fp16_to_fp32(wb.d) * static_cast<float>(scaled));
    return std::fma(xb.d, block, acc);
}

float q2_k_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ2_K, BlockQ8_K, q2_k_block_step>(n, kQK_K, w, x);
}

// --- Q3_K -------------------------------------------------------------------

void q3_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ3_K>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQK_K; ++i) {
            const float dl = d * static_cast<float>(q3_k_scale(i / 16, block.scales) - 32);
            dst[b * kQK_K + i] = dl * static_cast<float>(q3_code(block, i));
        }
    }
}

void q3_k_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    constexpr int kSubs = kQK_K / 16;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        int8_t L[kQK_K];
        float scales[kSubs];
        BlockQ3_K block{};
        // The 6-bit scale codes (the value is code - 32), one per sub-block.
        int codes6[kSubs] = {};
        if (importance != nullptr) {
            // quantize_row_q3_K_impl: weighted fits of the sub-blocks, then of
            // their scales (weighted by each sub-block's total weight).
            const float* qw_block = importance + b * kQK_K;
            float sumx2 = 0.0f;
            for (int i = 0; i < kQK_K; ++i) sumx2 += x[i] * x[i];
            const float sigma2 = 2 * sumx2 / kQK_K;
            float weights[16], sw[kSubs];
            for (int j = 0; j < kSubs; ++j) {
                for (int l = 0; l < 16; ++l) weights[l] = qw_block[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
                float sumw = 0.0f;
                for (int l = 0; l < 16; ++l) sumw += weights[l];
                sw[j] = sumw;
                scales[j] = quant_search::make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weights);
            }
            int8_t Ls[kSubs];
            block.d = fp32_to_fp16(quant_search::make_qx_quants(kSubs, 32, scales, Ls, sw));
            for (int j = 0; j < kSubs; ++j) codes6[j] = Ls[j];
        } else {
            float max_scale = 0.0f, amax = 0.0f;
            for (int j = 0; j < kSubs; ++j) {
                scales[j] = quant_search::make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
                if (std::fabs(scales[j]) > amax) {
                    amax = std::fabs(scales[j]);
                    max_scale = scales[j];
                }
            }
            if (max_scale != 0.0f) {
                // 6-bit signed scales: the largest maps to -32.
                const float iscale = -32.0f / max_scale;
                for (int j = 0; j < kSubs; ++j) codes6[j] = std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32;
                block.d = fp32_to_fp16(1.0f / iscale);
            } else {
                block.d = fp32_to_fp16(0.0f);
            }
        }
        for (int j = 0; j < kSubs; ++j) {
            const int l = codes6[j];
            if (j < 8) {
                block.scales[j] = static_cast<uint8_t>(l & 0xF);
            } else {
                block.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
            }
            block.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
        }
        for (int j = 0; j < kSubs; ++j) {
            const float d = fp16_to_fp32(block.d) * static_cast<float>(q3_k_scale(j, block.scales) - 32);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; ++l) L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        uint8_t codes[kQK_K];
        for (int i = 0; i < kQK_K; ++i) {
            int l = L[i];
            if (l > 3) {
                block.hmask[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
                l -= 4;
            }
            codes[i] = static_cast<uint8_t>(l);
        }
        pack_low2(codes, block.qs);
        store_block(dst, b, block);
    }
}

void q3_k_from_float(const float* src, void* dst, int64_t n) { q3_k_quantize(src, dst, n, nullptr); }

float q3_k_block_step(const BlockQ3_K& wb, const BlockQ8_K& xb, float acc) {
    int32_t total = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
        int32_t s = 0;
        for (int l = 0; l < 16; ++l) s += q3_code(wb, 16 * j + l) * int32_t{xb.qs[16 * j + l]};
        total += (q3_k_scale(j, wb.scales) - 32) * s;
    }
    return std::fma(xb.d, fp16_to_fp32(wb.d) * static_cast<float>(total), acc);
}

float q3_k_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ3_K, BlockQ8_K, q3_k_block_step>(n, kQK_K, w, x);
}

// --- Q5_K -------------------------------------------------------------------

void q5_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ5_K>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        for (int i = 0; i < kQK_K; ++i) {
            uint8_t sc, m;
            q4_k_scale_min(i / 32, block.scales, &sc, &m);
            const float dl = d * static_cast<float>(sc);
            const float ml = dmin * static_cast<float>(m);
            dst[b * kQK_K + i] = dl * static_cast<float>(q5_k_code(block, i)) - ml;
        }
    }
}

void q5_k_from_float(const float* src, void* dst, int64_t n) { q5_k_quantize(src, dst, n, nullptr); }

void q5_k_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        uint8_t L[kQK_K];
        BlockQ5_K block{};
        k_scale_min_quants(x, 31, -0.5f, 15, importance != nullptr ? importance + b * kQK_K : nullptr, block.scales,
                           &block.d, &block.dmin, L);
        for (int g = 0; g < 4; ++g) {
            for (int l = 0; l < 32; ++l) {
                int l1 = L[64 * g + l], l2 = L[64 * g + 32 + l];
                if (l1 > 15) {
                    l1 -= 16;
                    block.qh[l] |= static_cast<uint8_t>(1 << (2 * g));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    block.qh[l] |= static_cast<uint8_t>(2 << (2 * g));
                }
                block.qs[32 * g + l] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
        }
        store_block(dst, b, block);
    }
}

float q5_k_block_step(const BlockQ5_K& wb, const BlockQ8_K& xb, float acc) {
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        q4_k_scale_min(j, wb.scales, &sc, &m);
        int32_t s = 0;
        for (int l = 0; l < 32; ++l) s += q5_k_code(wb, 32 * j + l) * int32_t{xb.qs[32 * j + l]};
        scaled += int32_t{sc} * s;
        mins += int32_t{m} * (int32_t{xb.bsums[2 * j]} + int32_t{xb.bsums[2 * j + 1]});
    }
    const float block = std::fma(-fp16_to_fp32(wb.dmin), static_cast<float>(mins), fp16_to_fp32(wb.d) * static_cast<float>(scaled));
    return std::fma(xb.d, block, acc);
}

float q5_k_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ5_K, BlockQ8_K, q5_k_block_step>(n, kQK_K, w, x);
}

}  // namespace tessera
