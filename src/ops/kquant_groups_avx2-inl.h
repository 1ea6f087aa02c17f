// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX2, for the AVX2 and AVX3 (AVX-512 without VNNI)
// targets. Included by kquants_hwy.cpp once per target (hence the toggling
// include guard), inside nothing.
//
// A 256-bit vector takes 8 rows of a chunk's 64-byte line, one row per 32-bit
// lane, so a super-block is two halves of 8 rows. Per chunk h of 64 elements,
// 8 loads per half give each row's low nibbles (sub-block 2h) and high
// nibbles (sub-block 2h + 1); maddubs multiplies them (unsigned, 0..15) by 4
// of the column's activation bytes (signed) broadcast, adding pairs into
// int16: a pair is at most 2 * 15 * 128 = 3840, so a sub-block's 8 chunk
// products add up in int16 (at most 30720) and one madd with ones widens
// them. Each sub-block's sum is multiplied by its row's 6-bit scale; the
// mins take one madd per pair of sub-blocks (the rows' int16 pairs of mins
// against the column's pair of sub-block sums, from Q8_K's bsums). The float
// step is the canonical one (vec_dot_groups_canonical):
//   block = fma(-dmin_r, float(mins), d_r * float(scaled));  acc = fma(d_x, block, acc)
// so a row's bits equal the AVX-512 VNNI kernel's and every other target's.

#if defined(TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace avx2_kgroups {

// Columns per kernel call: each column keeps an accumulator per half.
constexpr int kMaxCols = 4;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
template <int C>
void q4_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace q4k_group;
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m256 acc[C][2];
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) {
                acc[c][h8] = accumulate ? _mm256_loadu_ps(y + c * y_stride + 8 * h8) : _mm256_setzero_ps();
            }
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kBlockBytes;
            prefetch_lines(p + kGroupPrefetchBytes, kQs);
            // The columns' sub-block sums as int16 pairs (sum_2h, sum_2h+1): Q8_K's
            // bsums are per 16 elements, a sub-block is 32.
            int32_t sum_pairs[C][4];
            for (int c = 0; c < C; ++c) {
                int16_t bsums[16];
                std::memcpy(bsums, x + c * x_stride + b * kQ8KBytes + kQ8KBsums, sizeof bsums);
                for (int h = 0; h < 4; ++h) {
                    const int32_t s0 = bsums[4 * h] + bsums[4 * h + 1], s1 = bsums[4 * h + 2] + bsums[4 * h + 3];
                    sum_pairs[c][h] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(s0)) |
                                                           (static_cast<uint32_t>(static_cast<uint16_t>(s1)) << 16));
                }
            }
            for (int h8 = 0; h8 < 2; ++h8) {
                __m256i scaled[C], mins[C];
                for (int c = 0; c < C; ++c) scaled[c] = mins[c] = _mm256_setzero_si256();
                for (int h = 0; h < 4; ++h) {
                    // int16 pairs (m_r,2h, m_r,2h+1) of rows 8 h8 .. 8 h8 + 7.
                    const __m128i m0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kMins + 16 * (2 * h) + 8 * h8));
                    const __m128i m1 =
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kMins + 16 * (2 * h + 1) + 8 * h8));
                    const __m256i min_pair = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m0, m1));
                    for (int c = 0; c < C; ++c) {
                        mins[c] = _mm256_add_epi32(mins[c], _mm256_madd_epi16(min_pair, _mm256_set1_epi32(sum_pairs[c][h])));
                    }
                }
                for (int h = 0; h < 4; ++h) {
                    const uint8_t* chunk = p + kQs + 512 * h + 32 * h8;
                    if (h8 == 0) prefetch_lines(chunk + kGroupPrefetchBytes, 512);
                    __m256i s_lo[C], s_hi[C];
                    for (int c = 0; c < C; ++c) s_lo[c] = s_hi[c] = _mm256_setzero_si256();
                    for (int k = 0; k < 8; ++k) {
                        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * k));
                        const __m256i w_lo = _mm256_and_si256(q, low);
                        const __m256i w_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
                        for (int c = 0; c < C; ++c) {
                            const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * k;
                            int32_t y4[2];
                            std::memcpy(&y4[0], xq, 4);
                            std::memcpy(&y4[1], xq + 32, 4);
                            s_lo[c] = _mm256_add_epi16(s_lo[c], _mm256_maddubs_epi16(w_lo, _mm256_set1_epi32(y4[0])));
                            s_hi[c] = _mm256_add_epi16(s_hi[c], _mm256_maddubs_epi16(w_hi, _mm256_set1_epi32(y4[1])));
                        }
                    }
                    const __m256i sc_lo = _mm256_cvtepu8_epi32(
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h) + 8 * h8)));
                    const __m256i sc_hi = _mm256_cvtepu8_epi32(
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h + 1) + 8 * h8)));
                    for (int c = 0; c < C; ++c) {
                        scaled[c] = _mm256_add_epi32(scaled[c],
                                                     _mm256_mullo_epi32(_mm256_madd_epi16(s_lo[c], ones), sc_lo));
                        scaled[c] = _mm256_add_epi32(scaled[c],
                                                     _mm256_mullo_epi32(_mm256_madd_epi16(s_hi[c], ones), sc_hi));
                    }
                }
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                const __m256 dmin =
                    _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kDmin + 16 * h8)));
                for (int c = 0; c < C; ++c) {
                    float dx;
                    std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                    const __m256 block = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(mins[c]),
                                                          _mm256_mul_ps(d, _mm256_cvtepi32_ps(scaled[c])));
                    acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), block, acc[c][h8]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) _mm256_storeu_ps(y + c * y_stride + 8 * h8, acc[c][h8]);
        }
    }
}

// QuantTraits::vec_dot_groups for Q4_K (x_sums unused: Q8_K has its bsums).
inline void q4_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {q4_k_group_kernel<1>, q4_k_group_kernel<2>,
                                                          q4_k_group_kernel<3>, q4_k_group_kernel<4>};
    static constexpr int32_t kNoSums = 0;  // the kernels read Q8_K's bsums instead
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace avx2_kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
