// Scalar references of Q4_1, Q5_0, Q5_1, MXFP4 and BF16 (block32_scalar.h).
#include "ops/block32_scalar.h"

#include "ops/block_io.h"
#include "ops/float_canonical.h"
#include "ops/quant_search.h"
#include "ops/quant_blocks.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

constexpr int kBlock = 32;

// The 5-bit code of element i of a Q5_0 / Q5_1 block.
int q5_code(const uint8_t* qs, const uint8_t* qh, int i) {
    uint32_t high;
    std::memcpy(&high, qh, 4);
    const int low = i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4;
    return low | static_cast<int>(((high >> i) & 1) << 4);
}

// Packs 32 5-bit codes into nibbles and the high-bit word.
void pack_q5(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
    uint32_t high = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = static_cast<uint8_t>((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
        high |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
        high |= static_cast<uint32_t>((L[j + 16] >> 4) & 1) << (j + 16);
    }
    std::memcpy(qh, &high, 4);
}

// llama.cpp's reference quantizer of Q4_1 / Q5_1 (nmax 15 / 31) for one
// block: min and scale (max - min) / nmax as fp16, codes (x - min) / scale
// rounded half up ((x - min) * id + 0.5 lies in [0.5, nmax + 0.5]: the
// truncation is the floor).
void min_scale_codes(const float* x, int nmax, uint16_t* d_out, uint16_t* m_out, uint8_t* L) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int i = 0; i < kBlock; ++i) {
        min = std::min(min, x[i]);
        max = std::max(max, x[i]);
    }
    const float d = (max - min) / static_cast<float>(nmax);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = fp32_to_fp16(d);
    *m_out = fp32_to_fp16(min);
    for (int i = 0; i < kBlock; ++i) L[i] = static_cast<uint8_t>(std::min(nmax, static_cast<int>((x[i] - min) * id + 0.5f)));
}

}  // namespace

// --- Q4_1 -------------------------------------------------------------------

void q4_1_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto block = load_block<BlockQ4_1>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float m = fp16_to_fp32(block.m);
        for (int i = 0; i < kBlock; ++i) dst[b * kBlock + i] = static_cast<float>(q4_nibble(block.qs, i)) * d + m;
    }
}

void q4_1_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        BlockQ4_1 block{};
        uint8_t L[kBlock];
        min_scale_codes(src + b * kBlock, 15, &block.d, &block.m, L);
        for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
        store_block(dst, b, block);
    }
}

float q4_1_block_step(const BlockQ4_1& wb, const BlockQ8_0& xb, float acc) {
    int32_t s = 0, t = 0;
    for (int i = 0; i < kBlock; ++i) {
        s += q4_nibble(wb.qs, i) * int32_t{xb.qs[i]};
        t += xb.qs[i];
    }
    const float block = std::fma(fp16_to_fp32(wb.m), static_cast<float>(t), fp16_to_fp32(wb.d) * static_cast<float>(s));
    return std::fma(fp16_to_fp32(xb.d), block, acc);
}

float q4_1_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ4_1, BlockQ8_0, q4_1_block_step>(n, kBlock, w, x);
}

// --- Q5_0 -------------------------------------------------------------------

void q5_0_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto block = load_block<BlockQ5_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kBlock; ++i) dst[b * kBlock + i] = static_cast<float>(q5_code(block.qs, block.qh, i) - 16) * d;
    }
}

void q5_0_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const float* x = src + b * kBlock;
        // As Q4_0: the element of largest magnitude, with its sign, maps to -16.
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < kBlock; ++i) {
            if (amax < std::fabs(x[i])) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ5_0 block{};
        block.d = fp32_to_fp16(d);
        uint8_t L[kBlock];
        // llama.cpp truncates through int8_t before clamping; x * id + 16.5 lies
        // in [0.5, 32.5], so the truncation is the floor.
        for (int i = 0; i < kBlock; ++i) L[i] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x[i] * id + 16.5f))));
        pack_q5(L, block.qs, block.qh);
        store_block(dst, b, block);
    }
}

namespace {

// llama.cpp's weights of a 32-block under an importance matrix: the
// importance times sqrt(sigma2 + x^2), sigma2 the row's mean square.
float row_sigma2(const float* x, int64_t n) {
    float sum_x2 = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / static_cast<float>(n);
}

void block_weights(const float* xb, const float* qw, float sigma2, float* weight) {
    for (int j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}


// Every weighted 32-block quantizer (llama.cpp's quantize_row_q*_impl): the
// row's weights per block, then the type's fit of the block, fit(x, w, block).
template <typename Block, typename Fit>
void quantize_weighted_blocks(const float* src, void* dst, int64_t n, const float* importance, const Fit& fit) {
    const float sigma2 = row_sigma2(src, n);
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const float* xb = src + b * kBlock;
        float weight[kBlock];
        block_weights(xb, importance + b * kBlock, sigma2, weight);
        Block block{};
        fit(xb, weight, block);
        store_block(dst, b, block);
    }
}

// 32 codes (0..15) in Q4_0's nibble order.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

// The weighted symmetric fit (Q4_0, Q5_0: codes l + nmax) and the weighted
// fit of scale and min (Q4_1, Q5_1), each returning the codes.
float symmetric_fit(const float* xb, const float* weight, int nmax, uint8_t* codes) {
    int8_t L[kBlock];
    const float d = quant_search::make_qx_quants(kBlock, nmax, xb, L, weight);
    for (int i = 0; i < kBlock; ++i) codes[i] = static_cast<uint8_t>(L[i]);
    return d;
}

float scale_min_fit(const float* xb, const float* weight, int nmax, uint8_t* codes, float* min) {
    uint8_t Laux[kBlock];
    return quant_search::make_qkx2_quants(kBlock, nmax, xb, weight, codes, min, Laux, -0.9f, 0.05f, 36, false);
}

}  // namespace

void q5_0_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    if (importance == nullptr) return q5_0_from_float(src, dst, n);
    quantize_weighted_blocks<BlockQ5_0>(src, dst, n, importance, [](const float* xb, const float* w, BlockQ5_0& block) {
        uint8_t codes[kBlock];
        block.d = fp32_to_fp16(symmetric_fit(xb, w, 16, codes));
        pack_q5(codes, block.qs, block.qh);
    });
}

void q5_1_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    if (importance == nullptr) return q5_1_from_float(src, dst, n);
    quantize_weighted_blocks<BlockQ5_1>(src, dst, n, importance, [](const float* xb, const float* w, BlockQ5_1& block) {
        uint8_t codes[kBlock];
        float min = 0.0f;
        block.d = fp32_to_fp16(scale_min_fit(xb, w, 31, codes, &min));
        block.m = fp32_to_fp16(-min);
        pack_q5(codes, block.qs, block.qh);
    });
}

void q4_1_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    if (importance == nullptr) return q4_1_from_float(src, dst, n);
    quantize_weighted_blocks<BlockQ4_1>(src, dst, n, importance, [](const float* xb, const float* w, BlockQ4_1& block) {
        uint8_t codes[kBlock];
        float min = 0.0f;
        block.d = fp32_to_fp16(scale_min_fit(xb, w, 15, codes, &min));
        block.m = fp32_to_fp16(-min);
        pack_nibbles(codes, block.qs);
    });
}

void q4_0_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    // (Without one, Q4_0's quantizer is its traits' from_float: quant_scalar.cpp.)
    if (importance == nullptr) throw make_error("internal: Q4_0's importance quantizer without an importance matrix");
    quantize_weighted_blocks<BlockQ4_0>(src, dst, n, importance, [](const float* xb, const float* w, BlockQ4_0& block) {
        uint8_t codes[kBlock];
        block.d = fp32_to_fp16(symmetric_fit(xb, w, 8, codes));
        pack_nibbles(codes, block.qs);
    });
}

float q5_0_block_step(const BlockQ5_0& wb, const BlockQ8_0& xb, float acc) {
    int32_t s = 0;
    for (int i = 0; i < kBlock; ++i) s += (q5_code(wb.qs, wb.qh, i) - 16) * int32_t{xb.qs[i]};
    return std::fma(static_cast<float>(s), fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d), acc);
}

float q5_0_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ5_0, BlockQ8_0, q5_0_block_step>(n, kBlock, w, x);
}

// --- Q5_1 -------------------------------------------------------------------

void q5_1_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto block = load_block<BlockQ5_1>(src, b);
        const float d = fp16_to_fp32(block.d);
        const float m = fp16_to_fp32(block.m);
        for (int i = 0; i < kBlock; ++i) dst[b * kBlock + i] = static_cast<float>(q5_code(block.qs, block.qh, i)) * d + m;
    }
}

void q5_1_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        BlockQ5_1 block{};
        uint8_t L[kBlock];
        min_scale_codes(src + b * kBlock, 31, &block.d, &block.m, L);
        pack_q5(L, block.qs, block.qh);
        store_block(dst, b, block);
    }
}

float q5_1_block_step(const BlockQ5_1& wb, const BlockQ8_0& xb, float acc) {
    int32_t s = 0, t = 0;
    for (int i = 0; i < kBlock; ++i) {
        s += q5_code(wb.qs, wb.qh, i) * int32_t{xb.qs[i]};
        t += xb.qs[i];
    }
    const float block = std::fma(fp16_to_fp32(wb.m), static_cast<float>(t), fp16_to_fp32(wb.d) * static_cast<float>(s));
    return std::fma(fp16_to_fp32(xb.d), block, acc);
}

float q5_1_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ5_1, BlockQ8_0, q5_1_block_step>(n, kBlock, w, x);
}

// --- MXFP4 ------------------------------------------------------------------

void mxfp4_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto block = load_block<BlockMXFP4>(src, b);
        const float d = e8m0_half_to_float(block.e);
        for (int i = 0; i < kBlock; ++i) dst[b * kBlock + i] = static_cast<float>(kMxfp4Values[q4_nibble(block.qs, i)]) * d;
    }
}

void mxfp4_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const float* x = src + b * kBlock;
        float amax = 0.0f;
        for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
        // The shared exponent puts the largest magnitude within E2M1's top
        // binade (values up to 6 = 12 halves).
        BlockMXFP4 block{};
        // (Clamped: below 2^-125 llama.cpp's conversion of a negative exponent
        // is undefined; such a block's codes are all 0 either way.)
        block.e = amax > 0.0f ? static_cast<uint8_t>(std::clamp(std::floor(std::log2(amax)) - 2 + 127, 0.0f, 255.0f)) : 0;
        const float d = e8m0_half_to_float(block.e);
        uint8_t L[kBlock];
        for (int i = 0; i < kBlock; ++i) {
            // The nearest grid value, the first of equals (llama.cpp's best_index_mxfp4).
            int best = 0;
            float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x[i]);
            for (int k = 1; k < 16; ++k) {
                const float err = std::fabs(static_cast<float>(kMxfp4Values[k]) * d - x[i]);
                if (err < best_err) {
                    best = k;
                    best_err = err;
                }
            }
            L[i] = static_cast<uint8_t>(best);
        }
        for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
        store_block(dst, b, block);
    }
}

float mxfp4_block_step(const BlockMXFP4& wb, const BlockQ8_0& xb, float acc) {
    int32_t s = 0;
    for (int i = 0; i < kBlock; ++i) s += int32_t{kMxfp4Values[q4_nibble(wb.qs, i)]} * int32_t{xb.qs[i]};
    return std::fma(static_cast<float>(s), e8m0_half_to_float(wb.e) * fp16_to_fp32(xb.d), acc);
}

float mxfp4_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockMXFP4, BlockQ8_0, mxfp4_block_step>(n, kBlock, w, x);
}

// --- BF16 -------------------------------------------------------------------

void bf16_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(src) + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(dst + i, &bits, 4);
    }
}

void bf16_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, src + i, 4);
        uint16_t h;
        if ((bits & 0x7fffffffu) > 0x7f800000u) {
            h = static_cast<uint16_t>((bits >> 16) | 64);  // NaN: keep it quiet
        } else {
            h = static_cast<uint16_t>((bits + (0x7fffu + ((bits >> 16) & 1))) >> 16);
        }
        std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &h, 2);
    }
}

float bf16_vec_dot(int64_t n, const void* w, const void* x) { return bf16_pairs_dot_canonical(n, w, x); }

float bf16_f32_vec_dot(int64_t n, const void* w, const void* x) {
    std::vector<float> row(static_cast<size_t>(n));
    bf16_to_float(w, row.data(), n);
    return f32_dot_canonical(n, row.data(), static_cast<const float*>(x));
}

}  // namespace tessera
