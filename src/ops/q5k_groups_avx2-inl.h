// Q5_K weights in the group layout (ops/kquant_group_layout.h) against Q8_K
// activations on 256-bit x86 vectors (targets AVX2 and AVX-512 without VNNI):
// Q4_K's AVX2 kernel (kquant_groups_avx2_kernel.inc: 8 rows per vector, two
// halves of a group) with each code's fifth bit from the chunk's high-bit
// vectors; maddubs's int16 sums are widened every 4 vectors (5-bit codes
// would overflow 8). Canonical bits: exact integers, Q4_K's float step.
// Included by kquants_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_Q5K_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q5K_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_Q5K_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_Q5K_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace q5k_avx2 {

// Columns per kernel call: each column keeps an accumulator per half.
constexpr int kMaxCols = 4;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
template <class Products, int C>
void q5_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace q5k_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i low = _mm256_set1_epi8(0x0F);
    const Ahead near = near_prefetch(QuantType::Q5_K);
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
            prefetch_ahead(p, kQs, near);
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
                        mins[c] = Products::add_pairs(mins[c], min_pair, _mm256_set1_epi32(sum_pairs[c][h]));
                    }
                }
                for (int h = 0; h < 4; ++h) {
                    const uint8_t* chunk = p + kQs + kChunkBytes * h + 32 * h8;
                    if (h8 == 0) prefetch_ahead(chunk, kChunkBytes, near);
                    // int32 sums per row; the int16 products of 4 vectors at most
                    // (31 x 127 x 2 x 4 < 2^15) between widenings.
                    __m256i s_lo[C], s_hi[C], t_lo[C], t_hi[C];
                    for (int c = 0; c < C; ++c) s_lo[c] = s_hi[c] = t_lo[c] = t_hi[c] = _mm256_setzero_si256();
                    for (int k = 0; k < 8; ++k) {
                        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * k));
                        __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + kHighs + 64 * (k / 4)));
                        TESSERA_PIN_REGISTERS(q, hv);  // loaded once each per step (ops/register_pin.h)
                        __m256i lo_top, hi_top;
                        switch (k % 4) {
                            case 0: lo_top = _mm256_slli_epi16(hv, 4); hi_top = _mm256_slli_epi16(hv, 3); break;
                            case 1: lo_top = _mm256_slli_epi16(hv, 2); hi_top = _mm256_slli_epi16(hv, 1); break;
                            case 2: lo_top = hv; hi_top = _mm256_srli_epi16(hv, 1); break;
                            default: lo_top = _mm256_srli_epi16(hv, 2); hi_top = _mm256_srli_epi16(hv, 3); break;
                        }
                        const __m256i w_lo = _mm256_or_si256(_mm256_and_si256(q, low), _mm256_and_si256(lo_top, bit4));
                        const __m256i w_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low),
                                                             _mm256_and_si256(hi_top, bit4));
                        for (int c = 0; c < C; ++c) {
                            const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * k;
                            int32_t y4[2];
                            std::memcpy(&y4[0], xq, 4);
                            std::memcpy(&y4[1], xq + 32, 4);
                            t_lo[c] = Products::add(t_lo[c], w_lo, _mm256_set1_epi32(y4[0]));
                            t_hi[c] = Products::add(t_hi[c], w_hi, _mm256_set1_epi32(y4[1]));
                            if (k % 4 == 3) {
                                s_lo[c] = _mm256_add_epi32(s_lo[c], Products::widen(t_lo[c]));
                                s_hi[c] = _mm256_add_epi32(s_hi[c], Products::widen(t_hi[c]));
                                t_lo[c] = t_hi[c] = _mm256_setzero_si256();
                            }
                        }
                    }
                    const __m256i sc_lo = _mm256_cvtepu8_epi32(
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h) + 8 * h8)));
                    const __m256i sc_hi = _mm256_cvtepu8_epi32(
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h + 1) + 8 * h8)));
                    for (int c = 0; c < C; ++c) {
                        scaled[c] = _mm256_add_epi32(scaled[c], _mm256_mullo_epi32(s_lo[c], sc_lo));
                        scaled[c] = _mm256_add_epi32(scaled[c], _mm256_mullo_epi32(s_hi[c], sc_hi));
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

// QuantTraits::vec_dot_groups for Q5_K (x_sums unused: Q8_K has its bsums),
// products by Products (avx2_products-inl.h).
template <class Products = avx2_products::Maddubs>
void q5_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {q5_k_group_kernel<Products, 1>, q5_k_group_kernel<Products, 2>,
                                                          q5_k_group_kernel<Products, 3>, q5_k_group_kernel<Products, 4>};
    static constexpr int32_t kNoSums = 0;  // the kernels read Q8_K's bsums instead
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}


}  // namespace q5k_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
