// Scalar reference kernels for Q4_K, Q6_K and Q8_K (see kquant_scalar.h and
// kquant_blocks.h for the layouts). The quantizers are llama.cpp's reference
// ones (quantize_row_q4_K_ref / q6_K_ref / q8_K_ref with make_qkx2_quants and
// make_qx_quants), rounding included, so the bytes match llama-quantize's
// without an importance matrix.
#include "ops/kquant_scalar.h"

#include "ops/block_io.h"
#include "ops/kquant_blocks.h"
#include "ops/quant_search.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

using quant_search::make_qkx2_quants;
using quant_search::make_qx_quants;
using quant_search::nearest_int;
using quant_search::kGroupMaxEps;

}  // namespace

// --- Q4_K -------------------------------------------------------------------

void q4_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ4_K>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        float* y = dst + b * kQK_K;
        for (int g = 0; g < 4; ++g) {  // 64 elements: sub-blocks 2g (low nibbles) and 2g+1 (high)
            uint8_t sc0, m0, sc1, m1;
            q4_k_scale_min(2 * g, block.scales, &sc0, &m0);
            q4_k_scale_min(2 * g + 1, block.scales, &sc1, &m1);
            const float d0 = d * sc0, min0 = dmin * m0;
            const float d1 = d * sc1, min1 = dmin * m1;
            const uint8_t* q = block.qs + 32 * g;
            for (int l = 0; l < 32; ++l) {
                y[64 * g + l] = d0 * static_cast<float>(q[l] & 0xF) - min0;
                y[64 * g + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - min1;
            }
        }
    }
}

void k_scale_min_quants(const float* x, int nmax, float rmin, int nstep, const float* importance, uint8_t* scales,
                        uint16_t* d_out, uint16_t* dmin_out, uint8_t* L) {
    constexpr int kSub = 32;
    constexpr int kSubs = kQK_K / kSub;
    uint8_t Laux[kSub];
    float weights[kSub];
    float sub_scales[kSubs];
    float mins[kSubs];
    uint8_t ls[kSubs], lm[kSubs];
    if (importance != nullptr) {
        // quantize_row_q4_K_impl / q5_K_impl: weights from the importance and
        // the super-block's spread; the 6-bit scales and mins fitted by
        // weighted least squares (make_qp_quants).
        float sum_x2 = 0.0f;
        for (int l = 0; l < kQK_K; ++l) sum_x2 += x[l] * x[l];
        const float sigma2 = 2 * sum_x2 / kQK_K;
        float sw[kSubs];
        for (int j = 0; j < kSubs; ++j) {
            const float* xs = x + kSub * j;
            for (int l = 0; l < kSub; ++l) weights[l] = importance[kSub * j + l] * std::sqrt(sigma2 + xs[l] * xs[l]);
            float sumw = 0.0f;
            for (int l = 0; l < kSub; ++l) sumw += weights[l];
            sw[j] = sumw;
            sub_scales[j] = make_qkx2_quants(kSub, nmax, xs, weights, L + kSub * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        *d_out = fp32_to_fp16(quant_search::make_qp_quants(kSubs, 63, sub_scales, ls, sw));
        *dmin_out = fp32_to_fp16(quant_search::make_qp_quants(kSubs, 63, mins, lm, sw));
    } else {
        float max_scale = 0.0f;  // the min is subtracted, so scales are never negative
        float max_min = 0.0f;
        for (int j = 0; j < kSubs; ++j) {
            const float* xs = x + kSub * j;
            // Weight each element by the sub-block's RMS plus its own magnitude:
            // large elements matter more, but small ones are not ignored.
            float sum_x2 = 0.0f;
            for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
            const float av_x = std::sqrt(sum_x2 / kSub);
            for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
            sub_scales[j] = make_qkx2_quants(kSub, nmax, xs, weights, L + kSub * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
            max_scale = std::max(max_scale, sub_scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        // The sub-block scales and mins become 6-bit multiples of d and dmin.
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < kSubs; ++j) {
            // (A fitted scale is practically never negative; clamp so one cannot
            // spill into the neighbouring packed bits.)
            ls[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_scale * sub_scales[j]), 0, 63));
            lm[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_min * mins[j]), 0, 63));
        }
        *d_out = fp32_to_fp16(max_scale / 63.0f);
        *dmin_out = fp32_to_fp16(max_min / 63.0f);
    }
    std::fill(scales, scales + 12, uint8_t{0});
    for (int j = 0; j < kSubs; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
            scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
        }
    }
    // Requantize against the scales as stored (rounded to 6 bits and fp16).
    for (int j = 0; j < kSubs; ++j) {
        uint8_t sc, m;
        q4_k_scale_min(j, scales, &sc, &m);
        const float d = fp16_to_fp32(*d_out) * sc;
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(*dmin_out) * m;
        for (int l = 0; l < kSub; ++l) {
            L[kSub * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[kSub * j + l] + dm) / d), 0, nmax));
        }
    }
}

void q4_k_from_float(const float* src, void* dst, int64_t n) { q4_k_quantize(src, dst, n, nullptr); }

void q4_k_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        uint8_t L[kQK_K];
        BlockQ4_K block{};
        k_scale_min_quants(x, 15, -1.0f, 20, importance != nullptr ? importance + b * kQK_K : nullptr, block.scales,
                           &block.d, &block.dmin, L);
        for (int g = 0; g < 4; ++g) {
            for (int l = 0; l < 32; ++l) {
                block.qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
            }
        }
        store_block(dst, b, block);
    }
}

float q4_k_vec_dot(int64_t n, const void* w, const void* x) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto wb = load_block<BlockQ4_K>(w, b);
        const auto xb = load_block<BlockQ8_K>(x, b);
        // sum_i (d sc q_i - dmin m) y_i = d sum_j sc_j (q . y)_j - dmin sum_j m_j sum(y)_j,
        // where sum(y) over a sub-block of 32 is two bsums.
        int32_t scaled = 0;
        int32_t mins = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            q4_k_scale_min(j, wb.scales, &sc, &m);
            const uint8_t* q = wb.qs + 32 * (j / 2);
            const int shift = (j % 2) * 4;
            const int8_t* y = xb.qs + 32 * j;
            int32_t isum = 0;
            for (int l = 0; l < 32; ++l) isum += ((q[l] >> shift) & 0xF) * int32_t{y[l]};
            scaled += int32_t{sc} * isum;
            mins += int32_t{m} * (int32_t{xb.bsums[2 * j]} + int32_t{xb.bsums[2 * j + 1]});
        }
        sum += xb.d * (fp16_to_fp32(wb.d) * static_cast<float>(scaled) -
                       fp16_to_fp32(wb.dmin) * static_cast<float>(mins));
    }
    return sum;
}

// --- Q6_K -------------------------------------------------------------------

void q6_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ6_K>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQK_K; ++i) {
            dst[b * kQK_K + i] = d * static_cast<float>(block.scales[i / 16]) * static_cast<float>(q6_k_code(block, i) - 32);
        }
    }
}

void q6_k_from_float(const float* src, void* dst, int64_t n) { q6_k_quantize(src, dst, n, nullptr); }

void q6_k_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    constexpr int kSub = 16;
    constexpr int kSubs = kQK_K / kSub;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        int8_t L[kQK_K];
        float scales[kSubs];
        float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
        float max_abs_scale = 0.0f;
        for (int j = 0; j < kSubs; ++j) {
            // (llama.cpp's quantize_row_q6_K_impl weighs by the importance alone.)
            const float* qw = importance != nullptr ? importance + b * kQK_K + kSub * j : nullptr;
            scales[j] = make_qx_quants(kSub, 32, x + kSub * j, L + kSub * j, qw);
            if (std::fabs(scales[j]) > max_abs_scale) {
                max_abs_scale = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        BlockQ6_K block{};
        if (max_abs_scale < kGroupMaxEps) {  // all zero: zero codes, zero scales
            store_block(dst, b, block);
            continue;
        }
        // The int8 scales: the largest maps to -128 (one more code than +127).
        const float iscale = -128.0f / max_scale;
        block.d = fp32_to_fp16(1.0f / iscale);
        for (int j = 0; j < kSubs; ++j) block.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
        // Requantize against the scales as stored.
        for (int j = 0; j < kSubs; ++j) {
            const float d = fp16_to_fp32(block.d) * static_cast<float>(block.scales[j]);
            if (d == 0.0f) continue;
            for (int l = 0; l < kSub; ++l) {
                L[kSub * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[kSub * j + l] / d), -32, 31) + 32);
            }
        }
        for (int half = 0; half < 2; ++half) {
            const int8_t* Lh = L + 128 * half;
            uint8_t* ql = block.ql + 64 * half;
            uint8_t* qh = block.qh + 32 * half;
            for (int l = 0; l < 32; ++l) {
                const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
        store_block(dst, b, block);
    }
}

float q6_k_block_step(const BlockQ6_K& wb, const BlockQ8_K& xb, float acc) {
    int32_t isum = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
        int32_t sub = 0;
        for (int l = 0; l < 16; ++l) {
            const int i = 16 * j + l;
            sub += (q6_k_code(wb, i) - 32) * int32_t{xb.qs[i]};
        }
        isum += int32_t{wb.scales[j]} * sub;
    }
    // The canonical order (row_groups.h), which every target's kernel reproduces.
    return std::fma(xb.d, fp16_to_fp32(wb.d) * static_cast<float>(isum), acc);
}

float q6_k_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ6_K, BlockQ8_K, q6_k_block_step>(n, kQK_K, w, x);
}

// --- Q8_K -------------------------------------------------------------------

void q8_k_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockQ8_K>(src, b);
        for (int i = 0; i < kQK_K; ++i) dst[b * kQK_K + i] = block.d * static_cast<float>(block.qs[i]);
    }
}

void q8_k_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        float max = 0.0f;
        float amax = 0.0f;
        for (int i = 0; i < kQK_K; ++i) {
            if (std::fabs(x[i]) > amax) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        }
        BlockQ8_K block{};
        if (amax != 0.0f) {
            // llama.cpp maps the signed extreme to -127 (not -128) so every code
            // fits [-127, 127]: SIMD kernels may then negate codes freely.
            const float iscale = -127.0f / max;
            for (int i = 0; i < kQK_K; ++i) block.qs[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[i])));
            for (int k = 0; k < kQK_K / 16; ++k) {
                int sum = 0;
                for (int l = 0; l < 16; ++l) sum += block.qs[16 * k + l];
                block.bsums[k] = static_cast<int16_t>(sum);
            }
            block.d = 1.0f / iscale;
        }
        store_block(dst, b, block);
    }
}

}  // namespace tessera
