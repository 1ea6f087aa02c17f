// Q2_K and Q3_K weights in the group layout (ops/kquant_group_layout.h)
// against Q8_K activations on 256-bit x86 vectors (targets AVX2 and AVX-512
// without VNNI): the AVX-512 VNNI kernel's arithmetic
// (lowbit_groups_vnni-inl.h) on 8 rows a vector, a group in two halves.
// With AVX-VNNI each step's 4 products add into int32 (vpdpbusd); plain
// maddubs keeps a sub-block's int16 pair sums and widens them by its scale
// in one vpmaddwd.
// Canonical bits: exact integers, then Q2_K's step as Q4_K's, Q3_K's
// acc = fma(d_x, d * float(s), acc). Included by kquants_hwy.cpp once per
// target (hence the toggling include guard).

#if defined(TESSERA_OPS_LOWBIT_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_LOWBIT_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_LOWBIT_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_LOWBIT_GROUPS_AVX2_INL_H_
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
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace lowbit_avx2 {

constexpr int kMaxCols = 4;

// Bit `from` of every byte moved to bit 2 (16-bit shifts; the kept bit never
// comes from the neighbouring byte).
HWY_INLINE __m256i bit_to_2(__m256i v, int from) {
    switch (from) {
        case 0: return _mm256_slli_epi16(v, 2);
        case 1: return _mm256_slli_epi16(v, 1);
        case 2: return v;
        case 3: return _mm256_srli_epi16(v, 1);
        case 4: return _mm256_srli_epi16(v, 2);
        case 5: return _mm256_srli_epi16(v, 3);
        case 6: return _mm256_srli_epi16(v, 4);
        default: return _mm256_srli_epi16(v, 5);
    }
}

HWY_INLINE __m256i low_pair(__m256i q, int t) {
    switch (t) {
        case 0: return q;
        case 1: return _mm256_srli_epi16(q, 2);
        case 2: return _mm256_srli_epi16(q, 4);
        default: return _mm256_srli_epi16(q, 6);
    }
}

// Where unpacklo/unpackhi of the 16 bsums (stored one after the other) put
// sub-block j's lane: each unpack takes 4 from each 128-bit half.
inline constexpr int kBsumSlot[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// With vpdpbusd (AVX-VNNI) each step's 4 products add into int32 lanes, and
// a sub-block's sum is multiplied by its scale (vpmulld). Plain maddubs
// leaves int16 pair sums that widening at every step (vpmaddwd by ones)
// would double (kPairs): a sub-block's 4 steps add in int16 (|sum| <=
// 4 * 2 * 7 * 128, plus Q3_K's 2 * 2048 below: no wrap), and one vpmaddwd by
// the sub-block's scale in both int16 of each row's lane widens and scales
// at once; Q3_K's -4 offset then moves in as each lane's start, -2 * bsum in
// each int16 (the pair adds to -4 * bsum), so no separate constant sum
// remains. The integers are the same either way.
template <bool kQ3, class Products, int C>
void lowbit_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                         const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                         bool accumulate) {
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    constexpr bool kPairs = std::is_same_v<Products, avx2_products::Maddubs>;
    constexpr bool kLaneStarts = kQ3 && kPairs;
    constexpr int64_t kBlockBytes = kQ3 ? q3k_group::kBlockBytes : q2k_group::kBlockBytes;
    constexpr int64_t kScales = kQ3 ? q3k_group::kScales : q2k_group::kScales;
    constexpr int64_t kQs = kQ3 ? q3k_group::kQs : q2k_group::kQs;
    constexpr int64_t kChunkBytes = kQ3 ? q3k_group::kChunkBytes : q2k_group::kChunkBytes;
    const __m256i two_bits = _mm256_set1_epi8(0x03);
    const __m256i bit2 = _mm256_set1_epi8(0x04);
    const Ahead near = near_prefetch(kQ3 ? QuantType::Q3_K : QuantType::Q2_K);
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
            // kLaneStarts: each column's -2 * bsum of every sub-block, twice in a 32-bit lane.
            alignas(32) int32_t lane_starts[C][16];
            if constexpr (kLaneStarts) {
                for (int c = 0; c < C; ++c) {
                    const __m256i bsums = _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(x + c * x_stride + b * kQ8KBytes + kQ8KBsums));
                    const __m256i minus2 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_add_epi16(bsums, bsums));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_starts[c]), _mm256_unpacklo_epi16(minus2, minus2));
                    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_starts[c] + 8),
                                       _mm256_unpackhi_epi16(minus2, minus2));
                }
            }
            for (int h8 = 0; h8 < 2; ++h8) {
                __m256i scaled[C], constant[C];
                for (int c = 0; c < C; ++c) scaled[c] = constant[c] = _mm256_setzero_si256();
                if constexpr (!kLaneStarts) {
                    // The constant part's factors (Q2_K: the mins, Q3_K: the scales s - 32) as the
                    // rows' int16 pairs of sub-blocks 2n, 2n + 1, against the column's bsum pairs.
                    for (int n = 0; n < 8; ++n) {
                        const __m128i b0 =
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * n) + 8 * h8));
                        const __m128i b1 =
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * (2 * n + 1) + 8 * h8));
                        const __m256i bytes = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(b0, b1));
                        const __m256i factors =
                            kQ3 ? _mm256_sub_epi16(bytes, _mm256_set1_epi16(32)) : _mm256_srli_epi16(bytes, 4);
                        for (int c = 0; c < C; ++c) {
                            int32_t bsum_pair;
                            std::memcpy(&bsum_pair, x + c * x_stride + b * kQ8KBytes + kQ8KBsums + 4 * n, 4);
                            constant[c] = Products::add_pairs(constant[c], factors, _mm256_set1_epi32(bsum_pair));
                        }
                    }
                }
                for (int h = 0; h < 4; ++h) {
                    const uint8_t* chunk = p + kQs + kChunkBytes * h + 32 * h8;
                    if (h8 == 0) prefetch_ahead(chunk, kChunkBytes, near);
                    __m256i hv[2];
                    if constexpr (kQ3) {
                        hv[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + q3k_group::kHighs));
                        hv[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + q3k_group::kHighs + 64));
                        TESSERA_PIN_REGISTERS(hv[0], hv[1]);  // one load each (ops/register_pin.h)
                    }
                    __m256i s[4][C];
                    for (int t = 0; t < 4; ++t) {
                        for (int c = 0; c < C; ++c) {
                            s[t][c] = kLaneStarts ? _mm256_set1_epi32(lane_starts[c][kBsumSlot[4 * h + t]])
                                                  : _mm256_setzero_si256();
                        }
                    }
                    for (int m = 0; m < 4; ++m) {
                        __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * m));
                        TESSERA_PIN_REGISTER(q);
                        for (int t = 0; t < 4; ++t) {
                            __m256i u = _mm256_and_si256(low_pair(q, t), two_bits);
                            if constexpr (kQ3) {
                                const int step = 4 * m + t;
                                u = _mm256_or_si256(u, _mm256_and_si256(bit_to_2(hv[step / 8], step % 8), bit2));
                            }
                            for (int c = 0; c < C; ++c) {
                                int32_t y4;
                                std::memcpy(&y4, x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 16 * t + 4 * m, 4);
                                s[t][c] = kPairs ? Products::add(s[t][c], u, _mm256_set1_epi32(y4))
                                                 : Products::add32(s[t][c], u, _mm256_set1_epi32(y4));
                            }
                        }
                    }
                    for (int t = 0; t < 4; ++t) {
                        const uint8_t* scale_bytes = p + kScales + 16 * (4 * h + t) + 8 * h8;
                        if constexpr (kPairs) {
                            const __m256i bytes = avx2_products::scale_pairs(scale_bytes);
                            const __m256i sc = kQ3 ? _mm256_sub_epi16(bytes, _mm256_set1_epi16(32))
                                                   : _mm256_and_si256(bytes, _mm256_set1_epi16(0x0F));
                            for (int c = 0; c < C; ++c) scaled[c] = Products::add_pairs(scaled[c], s[t][c], sc);
                        } else {
                            const __m256i bytes =
                                _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scale_bytes)));
                            const __m256i sc = kQ3 ? _mm256_sub_epi32(bytes, _mm256_set1_epi32(32))
                                                   : _mm256_and_si256(bytes, _mm256_set1_epi32(0x0F));
                            for (int c = 0; c < C; ++c) {
                                scaled[c] = _mm256_add_epi32(scaled[c], _mm256_mullo_epi32(s[t][c], sc));
                            }
                        }
                    }
                }
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h8)));
                for (int c = 0; c < C; ++c) {
                    float dx;
                    std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                    if constexpr (kQ3) {
                        const __m256i sum =
                            kLaneStarts ? scaled[c] : _mm256_sub_epi32(scaled[c], _mm256_slli_epi32(constant[c], 2));
                        acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), _mm256_mul_ps(d, _mm256_cvtepi32_ps(sum)), acc[c][h8]);
                    } else {
                        const __m256 dmin =
                            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + q2k_group::kDmin + 16 * h8)));
                        const __m256 block = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(constant[c]),
                                                              _mm256_mul_ps(d, _mm256_cvtepi32_ps(scaled[c])));
                        acc[c][h8] = _mm256_fmadd_ps(_mm256_set1_ps(dx), block, acc[c][h8]);
                    }
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h8 = 0; h8 < 2; ++h8) _mm256_storeu_ps(y + c * y_stride + 8 * h8, acc[c][h8]);
        }
    }
}

// QuantTraits::vec_dot_groups for Q3_K (kQ3) and Q2_K (x_sums unused: Q8_K has its bsums),
// products by Products (avx2_products-inl.h).
template <bool kQ3, class Products = avx2_products::Maddubs>
void lowbit_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {
        lowbit_group_kernel<kQ3, Products, 1>, lowbit_group_kernel<kQ3, Products, 2>,
        lowbit_group_kernel<kQ3, Products, 3>, lowbit_group_kernel<kQ3, Products, 4>};
    static constexpr int32_t kNoSums = 0;
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace lowbit_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
