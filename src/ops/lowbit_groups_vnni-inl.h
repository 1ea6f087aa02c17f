// Q2_K and Q3_K weights in the group layout (ops/kquant_group_layout.h)
// against Q8_K activations with AVX-512 VNNI (target AVX3_DL): 16 rows per
// vector, one row per 32-bit lane. A chunk's vector m gives 4 codes of every
// row for each of the chunk's 4 sub-blocks by a byte mask, of the vector or
// of it shifted down 4 (the odd sub-blocks' codes stay 2 bits up: 4 x the
// code; Q3_K's third bit from the chunk's high-bit vectors, moved next to
// them), one dpbusd each against 4 activation bytes broadcast. Per pair of
// sub-blocks, their two integer sums packed as int16 (the odd one taken
// down by its 4) times the rows' scales, and the constant part (Q2_K's
// mins, Q3_K's offset 4) against Q8_K's bsums: one dpwssd each. Then the
// canonical step (row_groups.h): Q2_K as Q4_K, Q3_K acc = fma(d_x, d *
// float(s), acc).
// Included by kquants_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_LOWBIT_GROUPS_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_LOWBIT_GROUPS_VNNI_INL_H_
#undef TESSERA_OPS_LOWBIT_GROUPS_VNNI_INL_H_
#else
#define TESSERA_OPS_LOWBIT_GROUPS_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include "ops/vnni_target.h"

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace lowbit_vnni {

constexpr int kMaxCols = 4;

// Bit `from` of every byte moved to bit `to` (16-bit shifts: the kept bit
// never comes from the neighbouring byte).
HWY_INLINE __m512i move_bit(__m512i v, int from, int to) {
    switch (to - from) {
        case 3: return _mm512_slli_epi16(v, 3);
        case 2: return _mm512_slli_epi16(v, 2);
        case 1: return _mm512_slli_epi16(v, 1);
        case 0: return v;
        case -1: return _mm512_srli_epi16(v, 1);
        case -2: return _mm512_srli_epi16(v, 2);
        case -3: return _mm512_srli_epi16(v, 3);
        default: return _mm512_srli_epi16(v, 4);
    }
}

template <bool kQ3, int C>
void lowbit_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                         const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                         bool accumulate) {
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    constexpr int64_t kBlockBytes = kQ3 ? q3k_group::kBlockBytes : q2k_group::kBlockBytes;
    constexpr int64_t kScales = kQ3 ? q3k_group::kScales : q2k_group::kScales;
    constexpr int64_t kQs = kQ3 ? q3k_group::kQs : q2k_group::kQs;
    constexpr int64_t kChunkBytes = kQ3 ? q3k_group::kChunkBytes : q2k_group::kChunkBytes;
    // Sub-block t's codes: t even in bits 0-1 of q (t = 0) or of q >> 4
    // (t = 2); t odd in bits 2-3 of the same, left in place (4 x the code,
    // one shift per vector instead of three; Q3_K's third bit goes to bit 2
    // or 4 to match).
    const __m512i even_code = _mm512_set1_epi8(0x03), odd_code = _mm512_set1_epi8(0x0C);
    const __m512i even_bit = _mm512_set1_epi8(0x04), odd_bit = _mm512_set1_epi8(0x10);
    const __m512i low_half = _mm512_set1_epi32(0xFFFF);
    // int16 lane 2r: element r of the low half, lane 2r + 1: element r of the high half.
    const __m512i kInterleaveHalves = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const Ahead near = near_prefetch(kQ3 ? QuantType::Q3_K : QuantType::Q2_K);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kBlockBytes;
            prefetch_ahead(p, kQs, near);
            __m512i scaled[C], constant[C];
            for (int c = 0; c < C; ++c) scaled[c] = constant[c] = _mm512_setzero_si512();
            for (int h = 0; h < 4; ++h) {
                const uint8_t* chunk = p + kQs + kChunkBytes * h;
                prefetch_ahead(chunk, kChunkBytes, near);
                __m512i hv[2];
                if constexpr (kQ3) {
                    hv[0] = _mm512_loadu_si512(chunk + q3k_group::kHighs);
                    hv[1] = _mm512_loadu_si512(chunk + q3k_group::kHighs + 64);
                    TESSERA_PIN_REGISTERS(hv[0], hv[1]);  // one load each (ops/register_pin.h)
                }
                __m512i s[4][C];
                for (int t = 0; t < 4; ++t)
                    for (int c = 0; c < C; ++c) s[t][c] = _mm512_setzero_si512();
                // Unrolled: the shifts' counts and masks are constants.
#pragma GCC unroll 4
                for (int m = 0; m < 4; ++m) {
                    __m512i q = _mm512_loadu_si512(chunk + 64 * m);
                    TESSERA_PIN_REGISTER(q);
                    const __m512i q4 = _mm512_srli_epi16(q, 4);
#pragma GCC unroll 4
                    for (int t = 0; t < 4; ++t) {
                        __m512i u = _mm512_and_si512(t < 2 ? q : q4, t % 2 == 0 ? even_code : odd_code);
                        if constexpr (kQ3) {
                            // The third bit of step (m, t): bit 4(m % 2) + t of hv[m / 2].
                            const __m512i third = move_bit(hv[m / 2], 4 * (m % 2) + t, t % 2 == 0 ? 2 : 4);
                            u = _mm512_or_si512(u, _mm512_and_si512(third, t % 2 == 0 ? even_bit : odd_bit));
                        }
                        for (int c = 0; c < C; ++c) {
                            int32_t y4;
                            std::memcpy(&y4, x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 16 * t + 4 * m, 4);
                            s[t][c] = _mm512_dpbusd_epi32(s[t][c], u, _mm512_set1_epi32(y4));
                        }
                    }
                }
                // Sub-blocks 4h + 2n, 4h + 2n + 1 as a pair: lane r holds the
                // int16 pair of their factors (the constant part's against the
                // column's bsums, then the codes' against their sums), one
                // dpwssd each. Both sums fit in int16 (|s| <= 16 * 7 * 127);
                // the odd one is 4 x its sum, so << 14 puts its sum in the
                // high half.
                for (int n = 0; n < 2; ++n) {
                    const __m512i bytes = _mm512_cvtepu8_epi16(
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kScales + 32 * (2 * h + n))));
                    const __m512i pairs = _mm512_permutexvar_epi16(kInterleaveHalves, bytes);
                    const __m512i factors = kQ3 ? _mm512_sub_epi16(pairs, _mm512_set1_epi16(32))
                                                : _mm512_and_si512(pairs, _mm512_set1_epi16(0x0F));
                    const __m512i constant_factors = kQ3 ? factors : _mm512_srli_epi16(pairs, 4);
                    for (int c = 0; c < C; ++c) {
                        int32_t bsum_pair;
                        std::memcpy(&bsum_pair, x + c * x_stride + b * kQ8KBytes + kQ8KBsums + 4 * (2 * h + n), 4);
                        constant[c] = _mm512_dpwssd_epi32(constant[c], constant_factors, _mm512_set1_epi32(bsum_pair));
                        const __m512i sums = _mm512_or_si512(_mm512_and_si512(s[2 * n][c], low_half),
                                                             _mm512_slli_epi32(s[2 * n + 1][c], 14));
                        scaled[c] = _mm512_dpwssd_epi32(scaled[c], sums, factors);
                    }
                }
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            for (int c = 0; c < C; ++c) {
                float dx;
                std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                if constexpr (kQ3) {
                    // The codes are q + 4: take off 4 sum_j s_j sum(y)_j.
                    const __m512i sum = _mm512_sub_epi32(scaled[c], _mm512_slli_epi32(constant[c], 2));
                    acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), acc[c]);
                } else {
                    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + q2k_group::kDmin)));
                    const __m512 block = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(constant[c]),
                                                          _mm512_mul_ps(d, _mm512_cvtepi32_ps(scaled[c])));
                    acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), block, acc[c]);
                }
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
    }
}

// QuantTraits::vec_dot_groups for Q3_K (kQ3) and Q2_K (x_sums unused: Q8_K has its bsums).
template <bool kQ3>
void lowbit_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {lowbit_group_kernel<kQ3, 1>, lowbit_group_kernel<kQ3, 2>,
                                                          lowbit_group_kernel<kQ3, 3>, lowbit_group_kernel<kQ3, 4>};
    static constexpr int32_t kNoSums = 0;
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace lowbit_vnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
