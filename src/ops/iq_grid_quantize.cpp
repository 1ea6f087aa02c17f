// llama.cpp's quantizers of the grid I-quants (quantize_row_iq2_xxs_impl,
// _iq2_xs_, _iq2_s_, _iq3_xxs_, _iq3_s_), rounding and order of operations
// included, so `tessera quantize` writes llama-quantize's bytes. All five
// share one search per sub-block (search_sub_block): signs taken out (IQ2_XXS,
// IQ2_XS, IQ3_XXS keep an even number of minus signs by flipping the least
// important weight), a range of inverse scales each rounding the magnitudes
// to levels and snapping every level vector that is not a point to its best
// neighbour (ops/iq_grids.h), the best scale by weighted least squares, then
// a refit; the super-block's fp16 d and 4-bit sub-block scales from them.
#include "ops/iq_grid_scalar.h"

#include "ops/block_io.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grids.h"
#include "ops/quant_search.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

using quant_search::nearest_int;

// How each type's search differs (the llama.cpp functions differ in these
// details only).
struct GridSpec {
    QuantType type;
    int sub;              // weights per scale: 32 or 16
    int max_q;            // levels per weight: 3 (IQ2) or 8 (IQ3)
    int steps;            // inverse scales tried: is in [-steps, steps] ...
    float step;           // ... id = (2 max_q - 1 + is * step) / max
    bool qp_start;        // IQ2_XXS: max replaced by make_qp_quants' scale * max_q
    bool even_signs;      // 7 sign bits per 8, the 8th their parity
    float zero_eps;       // a sub-block below this is zero (0: only exactly zero)
    float sigma_factor;   // sigma2 = factor * sum x^2 / 256
    int plain_weights;    // without an importance matrix: 0 x^2, 1 sigma2 / 4 + x^2, 2 as with all-ones importance
    bool refit_all;       // the refit snaps every point, not only those the search moved off the set
    bool refit_always;    // refit even when every point was on the set
    bool on_grid_start;   // what "on the set" starts as before the search
    float d_fudge;        // the stored d is max_scale / 31 times this
};

constexpr GridSpec kIq2xxsSpec{QuantType::IQ2_XXS, 32, 3, 6, 0.1f, true, true, 1e-15f, 1.0f, 2, true, true, true, 1.0f};
constexpr GridSpec kIq2xsSpec{QuantType::IQ2_XS, 16, 3, 9, 0.1f, false, true, 1e-15f, 1.0f, 2, false, false, true, 1.0f};
constexpr GridSpec kIq2sSpec{QuantType::IQ2_S, 16, 3, 9, 0.1f, false, false, 1e-8f, 2.0f, 1, false, false, true, 0.9875f};
constexpr GridSpec kIq3xxsSpec{QuantType::IQ3_XXS, 32, 8, 15, 0.2f, false, true, 1e-8f, 2.0f, 0, false, false, true, 1.0125f};
constexpr GridSpec kIq3sSpec{QuantType::IQ3_S, 32, 8, 9, 0.2f, false, false, 0.0f, 2.0f, 0, true, false, false, 1.033f};

// One sub-block's result: its scale (0: all zero), the level of each weight,
// the sign byte of each 8 (7 bits where even_signs) and each point's index.
struct SubBlock {
    bool zero = true;  // skipped as all zero: llama.cpp writes nothing of it
    float scale = 0.0f;
    int8_t L[32] = {};
    uint8_t signs[4] = {};
    int index[8] = {};
};

// Rounds xval under inverse scale id to levels of point k, snapping it to the
// set; returns whether it was on the set already.
bool round_point(const GridSpec& spec, const IqGridSearch& g, int k, const float* xval, const float* waux, float id,
                 float scale, int8_t* L) {
    const int lp = g.levels_per_point;
    int u = 0;
    for (int i = 0; i < lp; ++i) {
        const int l = std::clamp(nearest_int(0.5f * (id * xval[lp * k + i] - 1.0f)), 0, spec.max_q - 1);
        L[lp * k + i] = static_cast<int8_t>(l);
        u |= l << (g.bits_per_level * i);
    }
    if (g.map[u] >= 0) return true;
    iq_best_neighbour(g, u, xval + lp * k, waux + lp * k, scale, [](int odd) { return static_cast<float>(odd); },
                      L + lp * k);
    return false;
}

int point_index(const IqGridSearch& g, const int8_t* L) {
    int u = 0;
    for (int i = 0; i < g.levels_per_point; ++i) u |= L[i] << (g.bits_per_level * i);
    return g.map[u];
}

void weighted_sums(int n, const float* weight, const float* xval, const int8_t* L, float* sumqx, float* sumq2) {
    *sumqx = *sumq2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float q = static_cast<float>(2 * L[i] + 1);
        *sumqx += weight[i] * xval[i] * q;
        *sumq2 += weight[i] * q * q;
    }
}

SubBlock search_sub_block(const GridSpec& spec, const IqGridSearch& g, const float* xb, const float* qw, float sigma2) {
    const int n = spec.sub, lp = g.levels_per_point, points = n / lp;
    SubBlock out;
    float weight[32], waux[32], xval[32];
    for (int i = 0; i < n; ++i) {
        if (qw != nullptr) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
        else if (spec.plain_weights == 1) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
        else weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
    for (int k = 0; k < n / 8; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            const float x = xb[8 * k + i];
            xval[8 * k + i] = x >= 0 ? x : -x;
            if (x < 0) {
                ++nflip;
                s = static_cast<uint8_t>(s | (1 << i));
            }
        }
        if (spec.even_signs && nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s = static_cast<uint8_t>(s ^ (1 << imin));
        }
        out.signs[k] = spec.even_signs ? static_cast<uint8_t>(s & 127) : s;
    }
    float max = xval[0];
    for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
    if (spec.zero_eps > 0 ? max < spec.zero_eps : max == 0.0f) return out;
    float scale = max / static_cast<float>(2 * spec.max_q - 1);
    if (spec.qp_start) {
        uint8_t qp[32];
        scale = quant_search::make_qp_quants(n, spec.max_q + 1, xval, qp, weight);
        max = scale * static_cast<float>(spec.max_q);
        if (max <= 0) return out;
    }
    int8_t L[32] = {}, Laux[32];
    bool on_grid[8], on_grid_aux[8];
    std::fill(on_grid, on_grid + points, spec.on_grid_start);
    float best = 0.0f;
    for (int is = -spec.steps; is <= spec.steps; ++is) {
        const float id = (static_cast<float>(2 * spec.max_q - 1) + static_cast<float>(is) * spec.step) / max;
        const float this_scale = 1.0f / id;
        for (int k = 0; k < points; ++k) on_grid_aux[k] = round_point(spec, g, k, xval, waux, id, this_scale, Laux);
        float sumqx, sumq2;
        weighted_sums(n, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            std::copy(Laux, Laux + n, L);
            std::copy(on_grid_aux, on_grid_aux + points, on_grid);
        }
    }
    const bool any_off = std::count(on_grid, on_grid + points, false) > 0;
    if ((spec.refit_always || any_off) && scale > 0) {
        const float id = 1.0f / scale;
        for (int k = 0; k < points; ++k) {
            if (!spec.refit_all && on_grid[k]) continue;
            round_point(spec, g, k, xval, waux, id, scale, L);
        }
        float sumqx, sumq2;
        weighted_sums(n, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {  // llama.cpp: "should never happen"; the signs flip with it
        scale = -scale;
        for (int k = 0; k < (spec.even_signs ? std::min(4, n / 8) : n / 8); ++k) {
            out.signs[k] = static_cast<uint8_t>(spec.even_signs ? ~out.signs[k] & 127 : ~out.signs[k]);
        }
    }
    for (int k = 0; k < points; ++k) {
        out.index[k] = point_index(g, L + lp * k);
        if (out.index[k] < 0) throw make_error("{} quantizer left a level vector off its point set", quant_type_name(spec.type));
    }
    std::copy(L, L + n, out.L);
    out.scale = scale;
    out.zero = false;
    return out;
}

// The 4-bit scale of a sub-block against the super-block's 1 / d.
int scale_code(float id, float scale) { return std::clamp(nearest_int(0.5f * (id * scale - 1.0f)), 0, 15); }

// Every super-block of a row: the sub-blocks searched, then pack(block, sub
// blocks, 4-bit codes) and the stored d.
template <typename Block, typename Pack>
void quantize_rows(const GridSpec& spec, const float* src, void* dst, int64_t n, const float* importance, const Pack& pack) {
    const IqGridSearch& g = iq_grid_search(spec.type);
    std::vector<float> ones;
    if (importance == nullptr && spec.plain_weights == 2) {
        ones.assign(static_cast<size_t>(n), 1.0f);
        importance = ones.data();
    }
    const int subs = kQK_K / spec.sub;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* xbl = src + b * kQK_K;
        float sumx2 = 0.0f;
        for (int i = 0; i < kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = spec.sigma_factor * sumx2 / static_cast<float>(kQK_K);
        SubBlock sb[16];
        float max_scale = 0.0f;
        for (int ib = 0; ib < subs; ++ib) {
            sb[ib] = search_sub_block(spec, g, xbl + spec.sub * ib,
                                      importance != nullptr ? importance + b * kQK_K + spec.sub * ib : nullptr, sigma2);
            max_scale = std::max(max_scale, sb[ib].scale);
        }
        Block block{};
        int codes[16] = {};
        if (max_scale != 0.0f) {
            const float d = max_scale / 31.0f;
            block.d = fp32_to_fp16(d * spec.d_fudge);
            const float id = 1.0f / d;
            for (int ib = 0; ib < subs; ++ib) codes[ib] = scale_code(id, sb[ib].scale);
            pack(block, sb, codes);
        }
        store_block(dst, b, block);
    }
}

}  // namespace

void iq2_xxs_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_rows<BlockIQ2_XXS>(kIq2xxsSpec, src, dst, n, importance, [](BlockIQ2_XXS& y, const SubBlock* sb, const int* codes) {
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t q[2] = {0, 0};
            if (!sb[ib].zero) {
                for (int k = 0; k < 4; ++k) {
                    q[0] |= static_cast<uint32_t>(sb[ib].index[k]) << (8 * k);
                    q[1] |= static_cast<uint32_t>(sb[ib].signs[k]) << (7 * k);
                }
            }
            q[1] |= static_cast<uint32_t>(codes[ib]) << 28;
            std::memcpy(y.qs + 4 * ib, q, sizeof q);
        }
    });
}

void iq2_xs_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_rows<BlockIQ2_XS>(kIq2xsSpec, src, dst, n, importance, [](BlockIQ2_XS& y, const SubBlock* sb, const int* codes) {
        for (int ib = 0; ib < 16; ++ib) {
            for (int k = 0; k < 2 && !sb[ib].zero; ++k) {
                y.qs[2 * ib + k] = static_cast<uint16_t>(sb[ib].index[k] | (sb[ib].signs[k] << 9));
            }
            y.scales[ib / 2] = static_cast<uint8_t>(y.scales[ib / 2] | (codes[ib] << (4 * (ib % 2))));
        }
    });
}

void iq2_s_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_rows<BlockIQ2_S>(kIq2sSpec, src, dst, n, importance, [](BlockIQ2_S& y, const SubBlock* sb, const int* codes) {
        for (int ib = 0; ib < 16; ++ib) {
            for (int k = 0; k < 2 && !sb[ib].zero; ++k) {
                const int i8 = 2 * ib + k;
                y.qs[i8] = static_cast<uint8_t>(sb[ib].index[k] & 255);
                y.qh[i8 / 4] = static_cast<uint8_t>(y.qh[i8 / 4] | ((sb[ib].index[k] >> 8) << (2 * (i8 % 4))));
                y.qs[kQK_K / 8 + i8] = sb[ib].signs[k];
            }
            y.scales[ib / 2] = static_cast<uint8_t>(y.scales[ib / 2] | (codes[ib] << (4 * (ib % 2))));
        }
    });
}

void iq3_xxs_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_rows<BlockIQ3_XXS>(kIq3xxsSpec, src, dst, n, importance, [](BlockIQ3_XXS& y, const SubBlock* sb, const int* codes) {
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t aux = static_cast<uint32_t>(codes[ib]) << 28;
            for (int k = 0; k < 8 && !sb[ib].zero; ++k) y.qs[8 * ib + k] = static_cast<uint8_t>(sb[ib].index[k]);
            for (int k = 0; k < 4 && !sb[ib].zero; ++k) aux |= static_cast<uint32_t>(sb[ib].signs[k]) << (7 * k);
            std::memcpy(y.qs + kQK_K / 4 + 4 * ib, &aux, sizeof aux);
        }
    });
}

void iq3_s_quantize(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_rows<BlockIQ3_S>(kIq3sSpec, src, dst, n, importance, [](BlockIQ3_S& y, const SubBlock* sb, const int* codes) {
        // llama.cpp advances its qs and signs pointers only past sub-blocks
        // that are not all zero (an all-zero one is skipped before the
        // advance), so the ones after it move up; qh is indexed directly.
        int qs = 0, signs = 0;
        for (int ib = 0; ib < 8; ++ib) {
            if (sb[ib].zero) continue;
            for (int k = 0; k < 8; ++k) {
                y.qs[qs + k] = static_cast<uint8_t>(sb[ib].index[k] & 255);
                y.qh[ib] = static_cast<uint8_t>(y.qh[ib] | ((sb[ib].index[k] >> 8) << k));
            }
            for (int k = 0; k < 4; ++k) y.signs[signs + k] = sb[ib].signs[k];
            qs += 8;
            signs += 4;
        }
        for (int ib = 0; ib < 8; ib += 2) y.scales[ib / 2] = static_cast<uint8_t>(codes[ib] | (codes[ib + 1] << 4));
    });
}

void iq2_xxs_from_float(const float* src, void* dst, int64_t n) { iq2_xxs_quantize(src, dst, n, nullptr); }
void iq2_xs_from_float(const float* src, void* dst, int64_t n) { iq2_xs_quantize(src, dst, n, nullptr); }
void iq2_s_from_float(const float* src, void* dst, int64_t n) { iq2_s_quantize(src, dst, n, nullptr); }
void iq3_xxs_from_float(const float* src, void* dst, int64_t n) { iq3_xxs_quantize(src, dst, n, nullptr); }
void iq3_s_from_float(const float* src, void* dst, int64_t n) { iq3_s_quantize(src, dst, n, nullptr); }

}  // namespace tessera
