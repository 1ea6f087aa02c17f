// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights in the group layout
// (ops/block32_group_layout.h) against Q8_0 activations on 256-bit x86
// vectors (targets AVX2 and AVX-512 without VNNI): the AVX-512 VNNI kernel's
// arithmetic (block32_groups_vnni-inl.h) on 8 rows a vector, a group in two
// halves, products by maddubs (int16 pair sums widened per vector) or, with
// AVX-VNNI, vpdpbusd (ops/avx2_products-inl.h). IQ4_NL's grid goes
// in signed (|v| against y * sign(v)): grid + 128 would saturate maddubs.
// Canonical bits: exact integers, the same float steps. Included by
// dot_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_BLOCK32_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_BLOCK32_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_BLOCK32_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_BLOCK32_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/block32_group_layout.h"
#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/quant_blocks.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace block32_avx2 {

constexpr int kMaxCols = 4;

// The fifth bits of vector k's low (kHigh = 0) or high nibbles, at bit 4.
HWY_INLINE __m256i fifth_bits(__m256i hv, int from) {
    switch (from) {
        case 0: return _mm256_slli_epi16(hv, 4);
        case 1: return _mm256_slli_epi16(hv, 3);
        case 2: return _mm256_slli_epi16(hv, 2);
        case 3: return _mm256_slli_epi16(hv, 1);
        case 4: return hv;
        case 5: return _mm256_srli_epi16(hv, 1);
        case 6: return _mm256_srli_epi16(hv, 2);
        default: return _mm256_srli_epi16(hv, 3);
    }
}

template <QuantType kType, class Products, int C>
void block32_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                          const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                          bool accumulate) {
    using namespace block32_group;
    static constexpr Layout L = kType == QuantType::Q5_0 ? kQ5_0 : kType == QuantType::Q5_1 ? kQ5_1 : kType == QuantType::Q4_1 ? kQ4_1
                              : kType == QuantType::IQ4_NL ? kIQ4_NL : kMXFP4;
    constexpr bool kSigned = kType == QuantType::IQ4_NL;
    // With maddubs, the unsigned codes' int16 pair sums add up over 4 steps
    // before a widening madd: a pair is at most 2 * 31 * 127 = 7874 (Q5_0/Q5_1;
    // MXFP4's codes + 12 reach 24, Q4_1's 15), 4 of them 31496 < 2^15. IQ4_NL's
    // signed grid values reach 127: its pairs (32258) widen every step.
    constexpr bool kPairSums = !kSigned && std::is_same_v<Products, avx2_products::Maddubs>;
    constexpr int32_t kOffset = kType == QuantType::Q5_0 ? 16 : kType == QuantType::MXFP4 ? 12 : 0;
    constexpr int64_t kActBlockBytes = 34;
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
        kType == QuantType::MXFP4 ? kMxfp4Plus12 : reinterpret_cast<const uint8_t*>(kIq4nlValues))));
    const Ahead near = near_prefetch(kType);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m256 acc[C][2];
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) {
                acc[c][h8] = accumulate ? _mm256_loadu_ps(y + c * y_stride + 8 * h8) : _mm256_setzero_ps();
            }
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * L.bytes;
            prefetch_ahead(p, L.bytes, near);
            for (int h8 = 0; h8 < 2; ++h8) {
                // w[k]: rows' codes 4k..4k+3, w[k + 4]: 16 + 4k..; a[k] the unsigned operand.
                __m256i w[8];
                __m256i hv = L.highs != 0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + L.highs + 32 * h8))
                                          : _mm256_setzero_si256();
                if constexpr (L.highs != 0) TESSERA_PIN_REGISTER(hv);  // one load each (ops/register_pin.h)
                for (int k = 0; k < 4; ++k) {
                    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + L.qs + 64 * k + 32 * h8));
                    TESSERA_PIN_REGISTER(q);
                    const __m256i lo = _mm256_and_si256(q, low);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
                    if constexpr (L.highs != 0) {
                        w[k] = _mm256_or_si256(lo, _mm256_and_si256(fifth_bits(hv, 2 * k), bit4));
                        w[k + 4] = _mm256_or_si256(hi, _mm256_and_si256(fifth_bits(hv, 2 * k + 1), bit4));
                    } else if constexpr (kType == QuantType::Q4_1) {
                        w[k] = lo;
                        w[k + 4] = hi;
                    } else {
                        w[k] = _mm256_shuffle_epi8(grid, lo);
                        w[k + 4] = _mm256_shuffle_epi8(grid, hi);
                    }
                }
                __m256 dw;
                if constexpr (kType == QuantType::MXFP4) {
                    // 2^(e - 128): (e - 1) << 23, or the subnormals 2^-128, 2^-127 for e < 2.
                    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h8)));
                    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
                    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
                    const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
                    dw = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
                } else {
                    dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                }
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                    const int32_t ysum = sums[c * sums_stride + b];
                    __m256i s = _mm256_set1_epi32(-kOffset * ysum);
                    if constexpr (kPairSums) {
                        // 4 steps' pair sums add up in int16, then widen once.
                        for (int j0 = 0; j0 < 8; j0 += 4) {
                            __m256i s16 = _mm256_setzero_si256();
                            for (int j = j0; j < j0 + 4; ++j) {
                                int32_t y4;
                                std::memcpy(&y4, xb + 2 + (j < 4 ? 4 * j : 16 + 4 * (j - 4)), 4);
                                const __m256i products = _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(y4));
                                s16 = j == j0 ? products : avx2_products::accumulate16(s16, products);
                            }
                            s = avx2_products::accumulate32(s, avx2_products::Maddubs::widen(s16));
                        }
                    } else {
                        for (int j = 0; j < 8; ++j) {
                            int32_t y4;
                            std::memcpy(&y4, xb + 2 + (j < 4 ? 4 * j : 16 + 4 * (j - 4)), 4);
                            const __m256i yv = _mm256_set1_epi32(y4);
                            s = kSigned ? Products::add32(s, _mm256_sign_epi8(w[j], w[j]), _mm256_sign_epi8(yv, w[j]))
                                        : Products::add32(s, w[j], yv);
                        }
                    }
                    uint16_t h;
                    std::memcpy(&h, xb, 2);
                    const float dx = _cvtsh_ss(h);
                    if constexpr (L.m != 0) {  // Q5_1, Q4_1: the min times the activations' sum
                        const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + L.m + 16 * h8)));
                        const __m256 block = _mm256_fmadd_ps(m, _mm256_set1_ps(static_cast<float>(ysum)),
                                                             _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s)));
                        acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), block, acc[c][h8]);
                    } else {
                        acc[c][h8] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[c][h8]);
                    }
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) _mm256_storeu_ps(y + c * y_stride + 8 * h8, acc[c][h8]);
        }
    }
}

// IQ4_NL, 16 rows x C columns (C <= 6) as block32_group_kernel, chunk by
// chunk: a chunk's grid values and their magnitudes are formed once for all
// C columns (the signed products take |v| against y * sign(v), and only the
// signs follow the column), and the columns' int32 sums keep C registers;
// the float sums run in y (avx2_products::add_block_sums).
template <class Products, int C>
void iq4_nl_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                         const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride,
                         size_t unit_stride, bool accumulate) {
    using namespace block32_group;
    constexpr Layout L = kIQ4_NL;
    constexpr int64_t kActBlockBytes = 34;
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const Ahead near = near_prefetch(QuantType::IQ4_NL);
    // s + the 4 products of each lane (int32), added in s's register.
    const auto add = [](__m256i s, __m256i mag, __m256i signed_y, bool first) {
        if constexpr (std::is_same_v<Products, avx2_products::Maddubs>) {
            const __m256i d = avx2_products::Maddubs::dot4(mag, signed_y);
            return first ? d : avx2_products::accumulate32(s, d);
        } else {
            return first ? Products::dot4(mag, signed_y) : Products::add32(s, mag, signed_y);
        }
    };
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        if (!accumulate) avx2_products::clear_sums(y, y_stride, C);
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * L.bytes;
            prefetch_ahead(p, L.bytes, near);
            for (int h8 = 0; h8 < 2; ++h8) {
                __m256i s[C];
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    // Codes 4k.. of the rows (low nibbles) and 16 + 4k.. (high).
                    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + L.qs + 64 * k + 32 * h8));
                    TESSERA_PIN_REGISTER(q);  // one load for both nibbles (ops/register_pin.h)
                    const __m256i w_lo = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, low));
                    const __m256i w_hi = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), low));
                    const __m256i mag_lo = _mm256_abs_epi8(w_lo), mag_hi = _mm256_abs_epi8(w_hi);
                    for (int c = 0; c < C; ++c) {
                        const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                        int32_t y_lo, y_hi;
                        std::memcpy(&y_lo, xb + 2 + 4 * k, 4);
                        std::memcpy(&y_hi, xb + 2 + 16 + 4 * k, 4);
                        s[c] = add(s[c], mag_lo, _mm256_sign_epi8(_mm256_set1_epi32(y_lo), w_lo), k == 0);
                        s[c] = add(s[c], mag_hi, _mm256_sign_epi8(_mm256_set1_epi32(y_hi), w_hi), false);
                    }
                }
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                for (int c = 0; c < C; ++c) {
                    uint16_t h;
                    std::memcpy(&h, x + c * x_stride + b * kActBlockBytes, 2);
                    avx2_products::add_block_sums(y + c * y_stride + 8 * h8, s[c],
                                                  _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(h))));
                }
            }
        }
    }
}

// QuantTraits::vec_dot_groups for the type, with products formed by
// Products (avx2_products-inl.h).
template <QuantType kType, class Products = avx2_products::Maddubs>
void block32_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                            size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                            size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    if constexpr (kType == QuantType::IQ4_NL) {
        static constexpr Int8GroupKernel kernels[6] = {
            iq4_nl_group_kernel<Products, 1>, iq4_nl_group_kernel<Products, 2>, iq4_nl_group_kernel<Products, 3>,
            iq4_nl_group_kernel<Products, 4>, iq4_nl_group_kernel<Products, 5>, iq4_nl_group_kernel<Products, 6>};
        run_int8_group_tiles(kernels, n, w, group_stride, n_groups, x, x_stride, x_sums, sums_stride, n_cols, y,
                             y_stride, unit_n, unit_stride, accumulate);
    } else {
        static constexpr Int8GroupKernel kernels[kMaxCols] = {
            block32_group_kernel<kType, Products, 1>, block32_group_kernel<kType, Products, 2>,
            block32_group_kernel<kType, Products, 3>, block32_group_kernel<kType, Products, 4>};
        run_int8_group_tiles(kernels, n, w, group_stride, n_groups, x, x_stride, x_sums, sums_stride, n_cols, y,
                             y_stride, unit_n, unit_stride, accumulate);
    }
}

}  // namespace block32_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
