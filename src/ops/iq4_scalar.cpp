// Scalar references of IQ4_NL and IQ4_XS (iq4_scalar.h).
#include "ops/iq4_scalar.h"

#include "ops/block_io.h"
#include "ops/kquant_blocks.h"
#include "ops/quant_blocks.h"
#include "ops/quant_search.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

using quant_search::best_index_int8;
using quant_search::kGroupMaxEps;
using quant_search::nearest_int;

constexpr int kSub = 32;
constexpr int kTries = 7;

// llama.cpp's quantize_row_iq4_nl_impl for one block (n = 32: IQ4_NL) or
// super-block (n = 256: IQ4_XS, with scales_l / scales_h). Each sub-block of
// 32: the scale mapping its largest element onto the grid's end, then 2 * 7
// + 1 inverse scales each refitted by weighted least squares (weights x^2,
// or with an importance matrix its n values times sqrt(sigma2 + x^2)), the
// best kept. IQ4_XS then rounds each scale to a 6-bit multiple of one fp16
// d and requantizes against it.
void iq4_quantize(const float* x, int n, const float* importance, uint16_t* dh, uint8_t* q4, uint16_t* scales_h,
                  uint8_t* scales_l) {
    float sigma2 = 0.0f;
    for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.0f / static_cast<float>(n);
    const int8_t* values = kIq4nlValues;
    uint8_t L[kQK_K];
    float scales[kQK_K / kSub];
    float weight[kSub];
    std::memset(q4, 0, static_cast<size_t>(n / 2));
    *dh = fp32_to_fp16(0.0f);
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int ib = 0; ib < n / kSub; ++ib) {
        const float* xb = x + ib * kSub;
        uint8_t* Lb = L + ib * kSub;
        for (int j = 0; j < kSub; ++j) {
            weight[j] = importance != nullptr ? importance[ib * kSub + j] * std::sqrt(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
        }
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kSub; ++j) {
            if (std::fabs(xb[j]) > amax) {
                amax = std::fabs(xb[j]);
                max = xb[j];
            }
        }
        if (amax < kGroupMaxEps) {
            scales[ib] = 0.0f;
            continue;
        }
        float d = -max / static_cast<float>(values[0]);
        float id = 1.0f / d;
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < kSub; ++j) {
            const int l = best_index_int8(16, values, id * xb[j]);
            Lb[j] = static_cast<uint8_t>(l);
            const float q = values[l];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
        float best = d * sumqx;
        for (int itry = -kTries; itry <= kTries; ++itry) {
            id = static_cast<float>(itry + values[0]) / max;
            sumqx = sumq2 = 0.0f;
            for (int j = 0; j < kSub; ++j) {
                const float q = values[best_index_int8(16, values, id * xb[j])];
                sumqx += weight[j] * q * xb[j];
                sumq2 += weight[j] * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (std::fabs(d) > amax_scale) {
            amax_scale = std::fabs(d);
            max_scale = d;
        }
    }
    if (n > kSub) {
        *scales_h = 0;
        const float d = -max_scale / 32.0f;
        *dh = fp32_to_fp16(d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int ib = 0; ib < n / kSub; ++ib) {
            int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
            const float dl = d * static_cast<float>(l);
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int j = 0; j < kSub; ++j) L[ib * kSub + j] = static_cast<uint8_t>(best_index_int8(16, values, idl * x[ib * kSub + j]));
            l += 32;
            const auto low = static_cast<uint8_t>(l & 0xF);
            if (ib % 2 == 0) {
                scales_l[ib / 2] = low;
            } else {
                scales_l[ib / 2] |= static_cast<uint8_t>(low << 4);
            }
            *scales_h = static_cast<uint16_t>(*scales_h | ((l >> 4) << (2 * (ib % 8))));
        }
    } else {
        *dh = fp32_to_fp16(scales[0]);
        const float id = scales[0] != 0.0f ? 1.0f / scales[0] : 0.0f;
        for (int j = 0; j < n; ++j) L[j] = static_cast<uint8_t>(best_index_int8(16, values, id * x[j]));
    }
    for (int i = 0; i < n / 32; ++i) {
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

}  // namespace

// --- IQ4_NL -----------------------------------------------------------------

void iq4_nl_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kSub; ++b) {
        const auto block = load_block<BlockIQ4_NL>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kSub; ++i) dst[b * kSub + i] = d * static_cast<float>(kIq4nlValues[q4_nibble(block.qs, i)]);
    }
}

void iq4_nl_from_float(const float* src, void* dst, int64_t n) { iq4_nl_quantize(src, dst, n, nullptr); }

void iq4_nl_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kSub; ++b) {
        BlockIQ4_NL block{};
        iq4_quantize(src + b * kSub, kSub, importance != nullptr ? importance + b * kSub : nullptr, &block.d, block.qs,
                     nullptr, nullptr);
        store_block(dst, b, block);
    }
}

float iq4_nl_block_step(const BlockIQ4_NL& wb, const BlockQ8_0& xb, float acc) {
    int32_t s = 0;
    for (int i = 0; i < kSub; ++i) s += int32_t{kIq4nlValues[q4_nibble(wb.qs, i)]} * int32_t{xb.qs[i]};
    return std::fma(static_cast<float>(s), fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d), acc);
}

float iq4_nl_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ4_NL, BlockQ8_0, iq4_nl_block_step>(n, kSub, w, x);
}

// --- IQ4_XS -----------------------------------------------------------------

void iq4_xs_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<BlockIQ4_XS>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int j = 0; j < kQK_K / kSub; ++j) {
            const float dl = d * static_cast<float>(iq4_xs_scale(j, block.scales_l[j / 2], block.scales_h) - 32);
            for (int i = 0; i < kSub; ++i) {
                dst[b * kQK_K + kSub * j + i] = dl * static_cast<float>(kIq4nlValues[q4_nibble(block.qs + 16 * j, i)]);
            }
        }
    }
}

void iq4_xs_from_float(const float* src, void* dst, int64_t n) { iq4_xs_quantize(src, dst, n, nullptr); }

void iq4_xs_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        BlockIQ4_XS block{};
        iq4_quantize(src + b * kQK_K, kQK_K, importance != nullptr ? importance + b * kQK_K : nullptr, &block.d, block.qs,
                     &block.scales_h, block.scales_l);
        store_block(dst, b, block);
    }
}

float iq4_xs_block_step(const BlockIQ4_XS& wb, const BlockQ8_K& xb, float acc) {
    int32_t s = 0;
    for (int j = 0; j < kQK_K / kSub; ++j) {
        int32_t sub = 0;
        for (int i = 0; i < kSub; ++i) sub += int32_t{kIq4nlValues[q4_nibble(wb.qs + 16 * j, i)]} * int32_t{xb.qs[kSub * j + i]};
        s += (iq4_xs_scale(j, wb.scales_l[j / 2], wb.scales_h) - 32) * sub;
    }
    return std::fma(xb.d, fp16_to_fp32(wb.d) * static_cast<float>(s), acc);
}

float iq4_xs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ4_XS, BlockQ8_K, iq4_xs_block_step>(n, kQK_K, w, x);
}

}  // namespace tessera
