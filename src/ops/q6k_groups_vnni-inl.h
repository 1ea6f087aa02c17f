// Q6_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX-512 VNNI (target AVX3_DL): 16 rows per vector, one row
// per 32-bit lane. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// Per vector k of a chunk, one load gives row r's low nibbles of 4 codes of
// two sub-blocks in lane r, and one load of the chunk's high-bit vectors
// their top 2 bits (masked, shifted into place by 16-bit shifts, and joined
// to the nibbles by one vpternlogd select: a byte's bits never cross into
// the next one's kept bits). The 6-bit codes
// (q + 32, unsigned) take one dpbusd per 4 against 4 activation bytes
// broadcast; each of the chunk's 4 sub-blocks has its own sum, multiplied by
// its rows' int8 scales. The codes' offset 32 is sum_j sc_j sum(y)_j, one
// dpwssd per pair of sub-blocks from Q8_K's bsums. Then the canonical step
// (row_groups.h): acc = fma(d_x, d * float(s), acc), each lane its own row.

#if defined(TESSERA_OPS_Q6K_GROUPS_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q6K_GROUPS_VNNI_INL_H_
#undef TESSERA_OPS_Q6K_GROUPS_VNNI_INL_H_
#else
#define TESSERA_OPS_Q6K_GROUPS_VNNI_INL_H_
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
namespace q6k_vnni {

constexpr int kMaxCols = 4;

// Bits 0-3 of each byte from nibbles, bits 4-7 from top (vpternlogd's
// "select": mask ? nibbles : top, the mask low4).
HWY_INLINE __m512i select_nibble(__m512i nibbles, __m512i top, __m512i low4) {
    return _mm512_ternarylogic_epi32(nibbles, top, low4, 0xE4);
}

template <int C>
void q6_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace q6k_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i lows_mask = _mm512_set1_epi8(0x33), highs_mask = _mm512_set1_epi8(static_cast<char>(0xCC));
    // int16 lane 2r: element r of the low half, lane 2r + 1: element r of the high half.
    const __m512i kInterleaveHalves = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const Ahead near = near_prefetch(QuantType::Q6_K);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kBlockBytes;
            prefetch_ahead(p, kQs, near);
            __m512i total[C], offset[C];
            for (int c = 0; c < C; ++c) total[c] = offset[c] = _mm512_setzero_si512();
            // The offset: lane r holds the int16 pair (sc_r,2m, sc_r,2m+1)
            // against the column's pair (bsum_2m, bsum_2m+1), one dpwssd.
            for (int m = 0; m < 8; ++m) {
                const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kScales + 32 * m)));
                const __m512i pairs = _mm512_permutexvar_epi16(kInterleaveHalves, sc);
                for (int c = 0; c < C; ++c) {
                    int32_t bsum_pair;
                    std::memcpy(&bsum_pair, x + c * x_stride + b * kQ8KBytes + kQ8KBsums + 4 * m, 4);
                    offset[c] = _mm512_dpwssd_epi32(offset[c], pairs, _mm512_set1_epi32(bsum_pair));
                }
            }
            for (int h = 0; h < 4; ++h) {
                const uint8_t* chunk = p + kQs + kChunkBytes * h;
                prefetch_ahead(chunk, kChunkBytes, near);
                // Sub-blocks 4h + s: s = 0, 1 from the low nibbles of vectors
                // 0-3 and 4-7, s = 2, 3 from their high nibbles.
                __m512i s[4][C];
                for (int j = 0; j < 4; ++j)
                    for (int c = 0; c < C; ++c) s[j][c] = _mm512_setzero_si512();
                // Vectors k and k + 1 share a high-bit vector: its bits 0-1
                // and 4-5 (of k's and k + 1's low nibbles, hv & 0x33), 2-3
                // and 6-7 (their high nibbles', hv & 0xCC), each shifted to
                // bits 4-5 with zeros above (a 16-bit shift carries only into
                // the next byte's low nibble, which the select replaces),
                // then one select per code vector: bits 0-3 from the nibbles,
                // 4-7 from the top bits. 15 operations a pair, against 25 with
                // a mask and an or per vector.
                for (int k = 0; k < 8; k += 2) {
                    __m512i q0 = _mm512_loadu_si512(chunk + 64 * k);
                    __m512i q1 = _mm512_loadu_si512(chunk + 64 * (k + 1));
                    TESSERA_PIN_REGISTERS(q0, q1);  // loaded once each per step (ops/register_pin.h)
                    const __m512i hv = _mm512_loadu_si512(chunk + kHighs + 32 * k);
                    const __m512i lows_top = _mm512_and_si512(hv, lows_mask);
                    const __m512i highs_top = _mm512_and_si512(hv, highs_mask);
                    const __m512i w[4] = {
                        select_nibble(q0, _mm512_slli_epi16(lows_top, 4), low4),
                        select_nibble(_mm512_srli_epi16(q0, 4), _mm512_slli_epi16(highs_top, 2), low4),
                        select_nibble(q1, lows_top, low4),
                        select_nibble(_mm512_srli_epi16(q1, 4), _mm512_srli_epi16(highs_top, 2), low4)};
                    for (int v = 0; v < 2; ++v) {
                        for (int c = 0; c < C; ++c) {
                            const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * (k + v);
                            int32_t y4[2];
                            std::memcpy(&y4[0], xq, 4);
                            std::memcpy(&y4[1], xq + 32, 4);
                            s[k / 4][c] = _mm512_dpbusd_epi32(s[k / 4][c], w[2 * v], _mm512_set1_epi32(y4[0]));
                            s[2 + k / 4][c] = _mm512_dpbusd_epi32(s[2 + k / 4][c], w[2 * v + 1], _mm512_set1_epi32(y4[1]));
                        }
                    }
                }
                for (int j = 0; j < 4; ++j) {
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kScales + 16 * (4 * h + j))));
                    for (int c = 0; c < C; ++c) total[c] = _mm512_add_epi32(total[c], _mm512_mullo_epi32(s[j][c], sc));
                }
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            for (int c = 0; c < C; ++c) {
                float dx;
                std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                const __m512i sum = _mm512_sub_epi32(total[c], _mm512_slli_epi32(offset[c], 5));
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
    }
}

// QuantTraits::vec_dot_groups for Q6_K (x_sums unused: Q8_K has its bsums).
inline void q6_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {q6_k_group_kernel<1>, q6_k_group_kernel<2>,
                                                          q6_k_group_kernel<3>, q6_k_group_kernel<4>};
    static constexpr int32_t kNoSums = 0;
    run_int8_group_tiles<kMaxCols, 256>(kernels, n, w, group_stride, n_groups, x, x_stride, &kNoSums, 0, n_cols, y,
                                        y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace q6k_vnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
