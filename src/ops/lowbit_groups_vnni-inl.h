// Q2_K and Q3_K weights in the group layout (ops/kquant_group_layout.h)
// against Q8_K activations with AVX-512 VNNI (target AVX3_DL): 16 rows per
// vector, one row per 32-bit lane. A chunk's vector m gives, by a 16-bit
// shift and a byte mask, 4 codes of every row for each of the chunk's 4
// sub-blocks (Q3_K's third bit from the chunk's high-bit vectors), one dpbusd
// each against 4 activation bytes broadcast. Per sub-block, the integer sum
// times the rows' scales; the constant part (Q2_K's mins, Q3_K's offset 4)
// one dpwssd per pair of sub-blocks from Q8_K's bsums. Then the canonical
// step (row_groups.h): Q2_K as Q4_K, Q3_K acc = fma(d_x, d * float(s), acc).
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
#include "ops/row_groups.h"

#include "ops/vnni_target.h"

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace lowbit_vnni {

constexpr int kMaxCols = 4;

// Bit `from` of every byte moved to bit 2 (16-bit shifts: the kept bit never
// comes from the neighbouring byte).
HWY_INLINE __m512i bit_to_2(__m512i v, int from) {
    switch (from) {
        case 0: return _mm512_slli_epi16(v, 2);
        case 1: return _mm512_slli_epi16(v, 1);
        case 2: return v;
        case 3: return _mm512_srli_epi16(v, 1);
        case 4: return _mm512_srli_epi16(v, 2);
        case 5: return _mm512_srli_epi16(v, 3);
        case 6: return _mm512_srli_epi16(v, 4);
        default: return _mm512_srli_epi16(v, 5);
    }
}

HWY_INLINE __m512i low_pair(__m512i q, int t) {
    switch (t) {
        case 0: return q;
        case 1: return _mm512_srli_epi16(q, 2);
        case 2: return _mm512_srli_epi16(q, 4);
        default: return _mm512_srli_epi16(q, 6);
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
    const __m512i two_bits = _mm512_set1_epi8(0x03);
    const __m512i bit2 = _mm512_set1_epi8(0x04);
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
            // The constant part's factors (Q2_K: the mins, Q3_K: the scales),
            // lane r holding the int16 pair of sub-blocks 2n, 2n + 1.
            for (int n = 0; n < 8; ++n) {
                const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kScales + 32 * n)));
                const __m512i factors = kQ3 ? _mm512_sub_epi16(bytes, _mm512_set1_epi16(32)) : _mm512_srli_epi16(bytes, 4);
                const __m512i pairs = _mm512_permutexvar_epi16(kInterleaveHalves, factors);
                for (int c = 0; c < C; ++c) {
                    int32_t bsum_pair;
                    std::memcpy(&bsum_pair, x + c * x_stride + b * kQ8KBytes + kQ8KBsums + 4 * n, 4);
                    constant[c] = _mm512_dpwssd_epi32(constant[c], pairs, _mm512_set1_epi32(bsum_pair));
                }
            }
            for (int h = 0; h < 4; ++h) {
                const uint8_t* chunk = p + kQs + kChunkBytes * h;
                prefetch_ahead(chunk, kChunkBytes, near);
                __m512i hv[2];
                if constexpr (kQ3) {
                    hv[0] = _mm512_loadu_si512(chunk + q3k_group::kHighs);
                    hv[1] = _mm512_loadu_si512(chunk + q3k_group::kHighs + 64);
                }
                __m512i s[4][C];
                for (int t = 0; t < 4; ++t)
                    for (int c = 0; c < C; ++c) s[t][c] = _mm512_setzero_si512();
                for (int m = 0; m < 4; ++m) {
                    const __m512i q = _mm512_loadu_si512(chunk + 64 * m);
                    for (int t = 0; t < 4; ++t) {
                        __m512i u = _mm512_and_si512(low_pair(q, t), two_bits);
                        if constexpr (kQ3) {
                            const int step = 4 * m + t;
                            u = _mm512_or_si512(u, _mm512_and_si512(bit_to_2(hv[step / 8], step % 8), bit2));
                        }
                        for (int c = 0; c < C; ++c) {
                            int32_t y4;
                            std::memcpy(&y4, x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 16 * t + 4 * m, 4);
                            s[t][c] = _mm512_dpbusd_epi32(s[t][c], u, _mm512_set1_epi32(y4));
                        }
                    }
                }
                for (int t = 0; t < 4; ++t) {
                    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kScales + 16 * (4 * h + t))));
                    const __m512i sc = kQ3 ? _mm512_sub_epi32(bytes, _mm512_set1_epi32(32))
                                           : _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F));
                    for (int c = 0; c < C; ++c) scaled[c] = _mm512_add_epi32(scaled[c], _mm512_mullo_epi32(s[t][c], sc));
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
