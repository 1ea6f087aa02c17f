// IQ4_XS weights in the group layout (ops/kquant_group_layout.h) against
// Q8_K activations on 256-bit x86 vectors (targets AVX2 and AVX-512 without
// VNNI): Q4_K's AVX2 kernel (kquant_groups_avx2_kernel.inc: 8 rows per
// vector, two halves of a group) with each index looked up in the signed
// grid by a byte shuffle; maddubs takes |v| against y * sign(v) (|v|, |y| <=
// 127: no saturation), widened to int32 per vector. Canonical bits: exact
// integers, then acc = fma(d_x, d * float(s), acc). Included by
// kquants_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_IQ4XS_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ4XS_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_IQ4XS_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_IQ4XS_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/quant_blocks.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace iq4xs_avx2 {

// Columns per kernel call: each column keeps an accumulator per half.
constexpr int kMaxCols = 4;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
template <class Products, int C>
void iq4_xs_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace iq4xs_group;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    // The grid itself (signed): |w| <= 127 and |y| <= 127, so maddubs(|w|, y * sign(w)) never saturates.
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m256i low = _mm256_set1_epi8(0x0F);
    const Ahead near = near_prefetch(QuantType::IQ4_XS);
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
                __m256i scaled[C];
                for (int c = 0; c < C; ++c) scaled[c] = _mm256_setzero_si256();
                for (int h = 0; h < 4; ++h) {
                    const uint8_t* chunk = p + kQs + 512 * h + 32 * h8;
                    if (h8 == 0) prefetch_ahead(chunk, 512, near);
                    __m256i s_lo[C], s_hi[C];
                    for (int c = 0; c < C; ++c) s_lo[c] = s_hi[c] = _mm256_setzero_si256();
                    for (int k = 0; k < 8; ++k) {
                        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * k));
                        TESSERA_PIN_REGISTER(q);  // one load for both nibbles (ops/register_pin.h)
                        const __m256i v_lo = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, low));
                        const __m256i v_hi = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), low));
                        const __m256i a_lo = _mm256_sign_epi8(v_lo, v_lo), a_hi = _mm256_sign_epi8(v_hi, v_hi);
                        for (int c = 0; c < C; ++c) {
                            const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * k;
                            int32_t y4[2];
                            std::memcpy(&y4[0], xq, 4);
                            std::memcpy(&y4[1], xq + 32, 4);
                            s_lo[c] = Products::add32(s_lo[c], a_lo, _mm256_sign_epi8(_mm256_set1_epi32(y4[0]), v_lo));
                            s_hi[c] = Products::add32(s_hi[c], a_hi, _mm256_sign_epi8(_mm256_set1_epi32(y4[1]), v_hi));
                        }
                    }
                    const __m256i sc_lo = _mm256_sub_epi32(
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h) + 8 * h8))),
                        _mm256_set1_epi32(32));
                    const __m256i sc_hi = _mm256_sub_epi32(
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * h + 1) + 8 * h8))),
                        _mm256_set1_epi32(32));
                    for (int c = 0; c < C; ++c) {
                        scaled[c] = _mm256_add_epi32(scaled[c], _mm256_mullo_epi32(s_lo[c], sc_lo));
                        scaled[c] = _mm256_add_epi32(scaled[c], _mm256_mullo_epi32(s_hi[c], sc_hi));
                    }
                }
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                for (int c = 0; c < C; ++c) {
                    float dx;
                    std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                    acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), _mm256_mul_ps(d, _mm256_cvtepi32_ps(scaled[c])), acc[c][h8]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) _mm256_storeu_ps(y + c * y_stride + 8 * h8, acc[c][h8]);
        }
    }
}

// QuantTraits::vec_dot_groups for IQ4_XS (x_sums unused: Q8_K has its bsums),
// products by Products (avx2_products-inl.h).
template <class Products = avx2_products::Maddubs>
void iq4_xs_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {iq4_xs_group_kernel<Products, 1>, iq4_xs_group_kernel<Products, 2>,
                                                          iq4_xs_group_kernel<Products, 3>, iq4_xs_group_kernel<Products, 4>};
    static constexpr int32_t kNoSums = 0;  // the kernels read Q8_K's bsums instead
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}


}  // namespace iq4xs_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
