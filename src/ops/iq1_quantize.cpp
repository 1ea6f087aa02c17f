// llama.cpp's quantizers of IQ1_S and IQ1_M (quantize_row_iq1_s_impl,
// quantize_row_iq1_m_impl), rounding and order of operations included, so
// `tessera quantize` writes llama-quantize's bytes for the same importance.
//
// With three levels (-1, 0, 1) per weight, a sub-block's best levels under
// one scale are found exactly: sorted by value, every pair of boundaries
// (i1, i2) splits the weights into the three levels, and each split's
// least-squares scale and score follow from prefix sums. Each level vector of
// 8 that is not a point of the set is snapped to its best neighbour
// (ops/iq_grids.h), and the scale refitted. IQ1_S shifts every level of a
// sub-block of 32 by +1/8 or -1/8 (both tried); IQ1_M each 8 of a sub-block
// of 16 (the four sign pairs tried).
#include "ops/iq_grid_scalar.h"

#include "ops/block_io.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grids.h"
#include "ops/quant_search.h"
#include "util/fp16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tessera {

namespace {

using quant_search::nearest_int;

constexpr float kIq1Delta = 0.125f;
constexpr float kIq1sEps = 1e-12f;  // GROUP_MAX_EPS_IQ1_S
constexpr float kIq1mEps = 1e-7f;   // GROUP_MAX_EPS_IQ1_M
// The shifted levels: x_p with the +1/8 shift, x_m with -1/8.
constexpr float kXp[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
constexpr float kXm[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// The weights' order by value. llama.cpp sorts with qsort, which glibc
// implements as a merge sort: ties keep their order, as here.
template <int kN>
void sort_by_value(const float* xb, int* order) {
    std::iota(order, order + kN, 0);
    std::stable_sort(order, order + kN, [&](int a, int b) { return xb[a] < xb[b]; });
}

// The point index of each 8 levels of L (snapped where off the set), with
// the levels each 8 is measured with; returns whether all were on the set.
template <int kN, typename Levels>
bool point_indices(const IqGridSearch& g, const float* xb, const float* weight, float scale, Levels levels_of,
                   int8_t* L, int* index) {
    bool all_on_grid = true;
    for (int k = 0; k < kN / 8; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << (2 * j);
        int grid_index = g.map[u];
        if (grid_index < 0) {
            all_on_grid = false;
            const float* xg = levels_of(k);
            grid_index = iq_best_neighbour(g, u, xb + 8 * k, weight + 8 * k, scale, [&](int odd) { return xg[(odd - 1) / 2]; },
                                           L + 8 * k);
        }
        index[k] = grid_index;
    }
    return all_on_grid;
}

// The least-squares scale of the chosen points (unchanged unless positive).
template <int kN, typename Levels>
float refit(const IqGridSearch& g, const float* xb, const float* weight, Levels levels_of, const int* index, float scale) {
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int k = 0; k < kN / 8; ++k) {
        const float* xx = levels_of(k);
        const uint64_t point = g.odd[index[k]];
        for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[(((point >> (8 * j)) & 0xFF) - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

float block_sigma2(const float* xbl) {
    float sumx2 = 0.0f;
    for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / kQK_K;
}

float max_abs(const float* xb, int n) {
    float max = std::fabs(xb[0]);
    for (int i = 1; i < n; ++i) max = std::max(max, std::fabs(xb[i]));
    return max;
}

void iq1_s_block(const float* xbl, const float* qw, BlockIQ1_S& y) {
    constexpr int kN = 32;
    const IqGridSearch& g = iq_grid_search(QuantType::IQ1_S);
    std::memset(&y, 0, sizeof y);
    float scales[kQK_K / kN], weight[kN], sumx[kN + 1], sumw[kN + 1];
    int8_t L[kN];
    int order[kN], index[kN / 8];
    int shifts[kQK_K / kN];
    float max_scale = 0.0f;
    const float sigma2 = block_sigma2(xbl);
    for (int ib = 0; ib < kQK_K / kN; ++ib) {
        const float* xb = xbl + kN * ib;
        for (int i = 0; i < kN; ++i) weight[i] = (qw ? qw[kN * ib + i] : 1.0f) * std::sqrt(sigma2 + xb[i] * xb[i]);
        scales[ib] = 0.0f;
        shifts[ib] = 1;
        const float max = max_abs(xb, kN);
        if (max < kIq1sEps) continue;
        sort_by_value<kN>(xb, order);
        sumx[0] = sumw[0] = 0.0f;
        for (int j = 0; j < kN; ++j) {
            const int i = order[j];
            sumx[j + 1] = sumx[j] + weight[i] * xb[i];
            sumw[j + 1] = sumw[j] + weight[i];
        }
        float best_score = -FLT_MAX, scale = max;
        int besti1 = -1, besti2 = -1, best_shift = 0;
        for (int i1 = 0; i1 <= kN; ++i1) {
            for (int i2 = i1; i2 <= kN; ++i2) {
                for (int shift : {1, -1}) {
                    const float* x = shift == 1 ? kXp : kXm;
                    const float sumqx = (sumx[i1] - sumx[0]) * x[0] + (sumx[i2] - sumx[i1]) * x[1] + (sumx[kN] - sumx[i2]) * x[2];
                    const float sumq2 = (sumw[i1] - sumw[0]) * x[0] * x[0] + (sumw[i2] - sumw[i1]) * x[1] * x[1] +
                                        (sumw[kN] - sumw[i2]) * x[2] * x[2];
                    if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                        scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        besti1 = i1;
                        besti2 = i2;
                        best_shift = shift;
                    }
                }
            }
        }
        if (besti1 < 0 || besti2 < 0 || best_shift == 0) continue;
        for (int j = 0; j < kN; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
        if (scale < 0) {
            for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
            scale = -scale;
            best_shift = -best_shift;
        }
        const float* xx = best_shift == 1 ? kXp : kXm;
        const auto levels_of = [&](int) { return xx; };
        if (!point_indices<kN>(g, xb, weight, scale, levels_of, L, index)) {
            scale = refit<kN>(g, xb, weight, levels_of, index, scale);
        }
        int h = 0;
        for (int k = 0; k < kN / 8; ++k) {
            y.qs[(kN / 8) * ib + k] = static_cast<uint8_t>(index[k] & 255);
            h |= (index[k] >> 8) << (3 * k);
        }
        y.qh[ib] = static_cast<uint16_t>(h);
        scales[ib] = scale;
        shifts[ib] = best_shift;
        max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) return;
    const float d = max_scale / 15;
    y.d = fp32_to_fp16(d * 1.125f);  // llama.cpp's fudge factor
    const float id = 1 / d;
    for (int ib = 0; ib < kQK_K / kN; ++ib) {
        int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
        if (shifts[ib] == -1) l |= 8;
        y.qh[ib] = static_cast<uint16_t>(y.qh[ib] | (l << 12));
    }
}

void iq1_m_weights(const float* xb, const float* qw, float sigma2, float* weight) {
    constexpr int kN = 16;
    for (int i = 0; i < kN; ++i) weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

// IQ1_M's shift choice k of a sub-block of 16: bit 1 the first 8's sign
// (set: -1/8), bit 0 the second's; the levels of its 8s.
const float* iq1_m_levels(int k, int half) {
    return half == 0 ? (k < 2 ? kXp : kXm) : (k % 2 == 0 ? kXp : kXm);
}

void iq1_m_block(const float* xbl, const float* qw, BlockIQ1_M& y) {
    constexpr int kN = 16;
    const IqGridSearch& g = iq_grid_search(QuantType::IQ1_M);
    std::memset(&y, 0, sizeof y);
    float scales[kQK_K / kN], weight[kN];
    int8_t L[kN];
    int order[kN], index[kN / 8];
    int shifts[kQK_K / kN];
    float max_scale = 0.0f;
    const float sigma2 = block_sigma2(xbl);
    for (int ib = 0; ib < kQK_K / kN; ++ib) {
        const float* xb = xbl + kN * ib;
        iq1_m_weights(xb, qw ? qw + kN * ib : nullptr, sigma2, weight);
        scales[ib] = 0.0f;
        shifts[ib] = 0;
        const float max = max_abs(xb, kN);
        if (max < kIq1mEps) continue;
        sort_by_value<kN>(xb, order);
        float best_score = -FLT_MAX, scale = max;
        int besti1 = -1, besti2 = -1, best_k = -1;
        for (int i1 = 0; i1 <= kN; ++i1) {
            for (int i2 = i1; i2 <= kN; ++i2) {
                // Each of the four shift choices' sums, added in the sorted
                // order as llama.cpp adds them.
                float sumqx[4] = {}, sumq2[4] = {};
                for (int j = 0; j < kN; ++j) {
                    const int i = order[j];
                    const int level = j < i1 ? 0 : j < i2 ? 1 : 2;
                    for (int k = 0; k < 4; ++k) {
                        const float x = iq1_m_levels(k, i < kN / 2 ? 0 : 1)[level];
                        sumqx[k] += weight[i] * x * xb[i];
                        sumq2[k] += weight[i] * x * x;
                    }
                }
                for (int k = 0; k < 4; ++k) {
                    if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                        scale = sumqx[k] / sumq2[k];
                        best_score = scale * sumqx[k];
                        besti1 = i1;
                        besti2 = i2;
                        best_k = k;
                    }
                }
            }
        }
        if (besti1 < 0 || besti2 < 0 || best_k < 0) continue;
        for (int j = 0; j < kN; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
        if (scale < 0) {
            for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
            scale = -scale;
            best_k = 3 - best_k;  // both signs flip
        }
        const auto levels_of = [&](int half) { return iq1_m_levels(best_k, half); };
        if (!point_indices<kN>(g, xb, weight, scale, levels_of, L, index)) {
            scale = refit<kN>(g, xb, weight, levels_of, index, scale);
        }
        y.qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
        y.qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
        y.qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
        scales[ib] = scale;
        shifts[ib] = best_k;
        max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0.0f) return;
    constexpr uint8_t kShiftBits[4] = {0x00, 0x80, 0x08, 0x88};
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int ib = 0; ib < kQK_K / kN; ++ib) {
        const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
        sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
        y.qh[ib] = static_cast<uint8_t>(y.qh[ib] | kShiftBits[shifts[ib]]);
        // The super-block scale's own fit over every sub-block as stored.
        const float* xb = xbl + kN * ib;
        iq1_m_weights(xb, qw ? qw + kN * ib : nullptr, sigma2, weight);
        for (int k = 0; k < kN / 8; ++k) {
            const float* xx = iq1_m_levels(shifts[ib], k);
            const uint64_t point = g.odd[y.qs[2 * ib + k] + ((y.qh[ib] << (8 - 4 * k)) & 0x700)];
            for (int j = 0; j < 8; ++j) {
                const float w = weight[8 * k + j];
                const float q = xx[(((point >> (8 * j)) & 0xFF) - 1) / 2] * static_cast<float>(2 * l + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t d16 = fp32_to_fp16(d * 1.1125f);  // llama.cpp's fudge factor
    sc[0] = static_cast<uint16_t>(sc[0] | ((d16 & 0x000F) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((d16 & 0x00F0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((d16 & 0x0F00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (d16 & 0xF000));
    std::memcpy(y.scales, sc, sizeof sc);
}

template <typename Block, void (*QuantizeBlock)(const float*, const float*, Block&)>
void quantize_blocks(const float* src, void* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        Block y;
        QuantizeBlock(src + b * kQK_K, importance ? importance + b * kQK_K : nullptr, y);
        store_block(dst, b, y);
    }
}

}  // namespace

void iq1_s_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_blocks<BlockIQ1_S, iq1_s_block>(src, dst, n, importance);
}

void iq1_m_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_blocks<BlockIQ1_M, iq1_m_block>(src, dst, n, importance);
}

void iq1_s_from_float(const float* src, void* dst, int64_t n) { iq1_s_quantize(src, dst, n, nullptr); }
void iq1_m_from_float(const float* src, void* dst, int64_t n) { iq1_m_quantize(src, dst, n, nullptr); }

}  // namespace tessera
