// Q4_0 and Q8_0 in the group layout (ops/row_groups.h) with AVX2, for the
// AVX2 and AVX3 (AVX-512 without VNNI) targets. Included by dot_hwy.cpp once
// per target (hence the toggling include guard), inside nothing.
//
// A group's block holds its 16 rows' codes in chunks of 4 bytes per row: a
// 256-bit vector takes a chunk's 8 rows, one row per 32-bit lane, so a block
// is two halves of 8 rows. maddubs multiplies unsigned by signed bytes and
// adds pairs into int16, saturating; madd with ones then adds the pairs of a
// lane into its int32.
// - Q4_0: nibbles (0..15) x activations (-127..127): a pair is at most 3810,
//   so a block's 8 chunk products add up in int16 (at most 30480) and take
//   one madd; the nibbles' offset costs -8 * sum(y) per block (the
//   activations' block sums), the same for every row.
// - Q8_0: codes are stored + 128; (code - 128) * y = |w| * (y * sign(w)),
//   whose pairs stay within int16 (at most 128 * 127 * 2 = 32512).
// Every integer sum is exact, and a row's blocks are added in the canonical
// order (vec_dot_groups_canonical): the bits equal every other target's.

#if defined(TESSERA_OPS_DOT_INT8_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_DOT_INT8_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace avx2_groups {

// Up to 4 columns per kernel call (int8_vec_dot_groups below): 2 accumulators per column (one per half) and a
// block's unpacked weights must fit the 16 vector registers.

HWY_INLINE __m256i broadcast4(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Q8_0, 16 rows x C columns (C <= 8) as group_kernel below, chunk by chunk:
// each of a half's 8 chunks is loaded and its magnitudes taken once for all
// C columns, whose int32 sums take C registers of the 16. The float sums
// (2 C) do not fit beside them, so they run in y (avx2_products::add_block_sums).
template <int C>
void q8_0_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride,
                       size_t unit_stride, bool accumulate) {
    constexpr int64_t kGroupBlockBytes = 544, kScaleBytes = 32, kActBlockBytes = 34;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const Ahead near = near_prefetch(QuantType::Q8_0);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        if (!accumulate) avx2_products::clear_sums(y, y_stride, C);
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupBlockBytes;
            prefetch_ahead(p, kGroupBlockBytes, near);
            for (int h = 0; h < 2; ++h) {
                const uint8_t* q = p + kScaleBytes + 32 * h;
                __m256i s[C];
#pragma GCC unroll 8
                for (int k = 0; k < 8; ++k) {
                    // Signed codes: their magnitudes, and the signs applied to y.
                    const __m256i w =
                        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k)), flip);
                    const __m256i mag = _mm256_abs_epi8(w);
                    for (int c = 0; c < C; ++c) {
                        const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                        const __m256i signed_y = _mm256_sign_epi8(broadcast4(xb + 2 + 4 * k), w);
                        const __m256i pairs = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, signed_y), ones);
                        s[c] = k == 0 ? pairs : avx2_products::accumulate32(s[c], pairs);
                    }
                }
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
                for (int c = 0; c < C; ++c) {
                    uint16_t hx;
                    std::memcpy(&hx, x + c * x_stride + b * kActBlockBytes, 2);
                    const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(hx)));
                    avx2_products::add_block_sums(y + c * y_stride + 8 * h, s[c], scale);
                }
            }
        }
    }
}

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <bool kQ4, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    constexpr int64_t kGroupBlockBytes = kQ4 ? 288 : 544, kScaleBytes = 32, kActBlockBytes = 34;
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const Ahead near = near_prefetch(kQ4 ? QuantType::Q4_0 : QuantType::Q8_0);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m256 acc[C][2];
        for (int c = 0; c < C; ++c) {
            for (int h = 0; h < 2; ++h) {
                acc[c][h] = accumulate ? _mm256_loadu_ps(y + c * y_stride + 8 * h) : _mm256_setzero_ps();
            }
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupBlockBytes;
            prefetch_ahead(p, kGroupBlockBytes, near);
            for (int h = 0; h < 2; ++h) {
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
                const uint8_t* q = p + kScaleBytes + 32 * h;
                if constexpr (kQ4) {
                    // w[k]: codes 4k.. (low nibbles), w[4 + k]: codes 16 + 4k..
                    __m256i w[8];
                    for (int k = 0; k < 4; ++k) {
                        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k));
                        w[k] = _mm256_and_si256(v, low);
                        w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                    }
                    for (int c = 0; c < C; ++c) {
                        const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                        __m256i s16 = _mm256_maddubs_epi16(w[0], broadcast4(xb + 2));
                        for (int k = 1; k < 4; ++k) {
                            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[k], broadcast4(xb + 2 + 4 * k)));
                        }
                        for (int k = 0; k < 4; ++k) {
                            s16 = _mm256_add_epi16(s16,
                                                   _mm256_maddubs_epi16(w[k + 4], broadcast4(xb + 2 + 16 + 4 * k)));
                        }
                        const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(s16, ones),
                                                           _mm256_set1_epi32(-8 * sums[c * sums_stride + b]));
                        uint16_t hx;
                        std::memcpy(&hx, xb, 2);
                        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(hx)));
                        acc[c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[c][h]);
                    }
                } else {
                    // Signed codes: their magnitudes, and the signs applied to y.
                    __m256i w[8], mag[8];
                    for (int k = 0; k < 8; ++k) {
                        w[k] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k)),
                                                flip);
                        mag[k] = _mm256_abs_epi8(w[k]);
                    }
                    for (int c = 0; c < C; ++c) {
                        const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                        __m256i s = _mm256_setzero_si256();
                        for (int k = 0; k < 8; ++k) {
                            const __m256i signed_y = _mm256_sign_epi8(broadcast4(xb + 2 + 4 * k), w[k]);
                            s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(mag[k], signed_y), ones));
                        }
                        uint16_t hx;
                        std::memcpy(&hx, xb, 2);
                        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(hx)));
                        acc[c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[c][h]);
                    }
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + c * y_stride + 8 * h, acc[c][h]);
        }
    }
}

// QuantTraits::vec_dot_groups for Q4_0 (kQ4) and Q8_0.
template <bool kQ4>
constexpr VecDotGroupsFn int8_vec_dot_groups =
    int8_group_entry<32, group_kernel<kQ4, 1>, group_kernel<kQ4, 2>, group_kernel<kQ4, 3>, group_kernel<kQ4, 4>>;
template <>
constexpr VecDotGroupsFn int8_vec_dot_groups<false> =
    int8_group_entry<32, q8_0_group_kernel<1>, q8_0_group_kernel<2>, q8_0_group_kernel<3>, q8_0_group_kernel<4>,
                     q8_0_group_kernel<5>, q8_0_group_kernel<6>, q8_0_group_kernel<7>, q8_0_group_kernel<8>>;

}  // namespace avx2_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
