// Q6_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations on 256-bit x86 vectors (targets AVX2 and AVX-512 without
// VNNI): the AVX-512 VNNI kernel's arithmetic (q6k_groups_vnni-inl.h) on 8
// rows a vector, a group in two halves, maddubs's int16 pair sums widened to
// int32 per vector (6-bit codes: 63 x 127 x 2 fits, more does not). The
// offset 32 is taken off as 32 sum_j sc_j sum(y)_j (madd of the rows' int16
// scale pairs against the column's bsum pairs). Canonical bits: exact
// integers, then acc = fma(d_x, d * float(s), acc). Included by
// kquants_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_Q6K_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q6K_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_Q6K_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_Q6K_GROUPS_AVX2_INL_H_
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
namespace q6k_avx2 {

constexpr int kMaxCols = 4;

template <class Products, int C>
void q6_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace q6k_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i top2 = _mm256_set1_epi8(0x30);
    const Ahead near = near_prefetch(QuantType::Q6_K);
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
            for (int h8 = 0; h8 < 2; ++h8) {
                __m256i total[C], offset[C];
                for (int c = 0; c < C; ++c) total[c] = offset[c] = _mm256_setzero_si256();
                // Lane r: the int16 pair (sc_r,2n, sc_r,2n+1) against the column's (bsum_2n, bsum_2n+1).
                for (int n = 0; n < 8; ++n) {
                    const __m128i s0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * n) + 8 * h8));
                    const __m128i s1 =
                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * n + 1) + 8 * h8));
                    const __m256i pairs = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s0, s1));
                    for (int c = 0; c < C; ++c) {
                        int32_t bsum_pair;
                        std::memcpy(&bsum_pair, x + c * x_stride + b * kQ8KBytes + kQ8KBsums + 4 * n, 4);
                        offset[c] = Products::add_pairs(offset[c], pairs, _mm256_set1_epi32(bsum_pair));
                    }
                }
                for (int h = 0; h < 4; ++h) {
                    const uint8_t* chunk = p + kQs + kChunkBytes * h + 32 * h8;
                    if (h8 == 0) prefetch_ahead(chunk, kChunkBytes, near);
                    __m256i s[4][C];
                    for (int j = 0; j < 4; ++j)
                        for (int c = 0; c < C; ++c) s[j][c] = _mm256_setzero_si256();
                    for (int k = 0; k < 8; ++k) {
                        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * k));
                        __m256i hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + kHighs + 64 * (k / 2)));
                        TESSERA_PIN_REGISTERS(q, hv);  // loaded once each per step (ops/register_pin.h)
                        const __m256i lo_top = (k % 2 == 0) ? _mm256_slli_epi16(hv, 4) : hv;
                        const __m256i hi_top = (k % 2 == 0) ? _mm256_slli_epi16(hv, 2) : _mm256_srli_epi16(hv, 2);
                        const __m256i w_lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(lo_top, top2));
                        const __m256i w_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                                                             _mm256_and_si256(hi_top, top2));
                        for (int c = 0; c < C; ++c) {
                            const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * k;
                            int32_t y4[2];
                            std::memcpy(&y4[0], xq, 4);
                            std::memcpy(&y4[1], xq + 32, 4);
                            // Each product alone, then added: one generated token's
                            // sums would otherwise be chains of vpdpbusd latencies.
                            s[k / 4][c] = _mm256_add_epi32(s[k / 4][c], Products::dot4(w_lo, _mm256_set1_epi32(y4[0])));
                            s[2 + k / 4][c] =
                                _mm256_add_epi32(s[2 + k / 4][c], Products::dot4(w_hi, _mm256_set1_epi32(y4[1])));
                        }
                    }
                    for (int j = 0; j < 4; ++j) {
                        const __m256i sc = _mm256_cvtepi8_epi32(
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (4 * h + j) + 8 * h8)));
                        for (int c = 0; c < C; ++c) total[c] = _mm256_add_epi32(total[c], _mm256_mullo_epi32(s[j][c], sc));
                    }
                }
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                for (int c = 0; c < C; ++c) {
                    float dx;
                    std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                    const __m256i sum = _mm256_sub_epi32(total[c], _mm256_slli_epi32(offset[c], 5));
                    acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), _mm256_mul_ps(d, _mm256_cvtepi32_ps(sum)), acc[c][h8]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) _mm256_storeu_ps(y + c * y_stride + 8 * h8, acc[c][h8]);
        }
    }
}

// QuantTraits::vec_dot_groups for Q6_K (x_sums unused: Q8_K has its bsums),
// products by Products (avx2_products-inl.h).
template <class Products = avx2_products::Maddubs>
void q6_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {q6_k_group_kernel<Products, 1>, q6_k_group_kernel<Products, 2>,
                                                          q6_k_group_kernel<Products, 3>, q6_k_group_kernel<Products, 4>};
    static constexpr int32_t kNoSums = 0;
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace q6k_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
