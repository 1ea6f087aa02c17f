// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX-512 VNNI (target AVX3_DL): 16 rows per vector, one row
// per 32-bit lane. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// Per chunk h of 64 elements (sub-blocks 2h and 2h + 1), 8 loads give row
// r's codes in lane r: low nibbles (sub-block 2h) and high nibbles, left in
// place at 16 x their value (one andnot instead of a shift and an and per
// load; the lane's sum is shifted down once, exactly), 4 codes per dpbusd
// against 4 of the column's activation bytes (signed) broadcast to every lane.
// Each sub-block's integer sum is multiplied by its row's 6-bit scale (stored
// unpacked, one widening load) and added up over the super-block; the mins
// take one dpwssd per pair of sub-blocks (the rows' int16 pairs of mins
// against the column's pair of sub-block sums from Q8_K's bsums). The float
// scales apply once per super-block:
//   y_r += d_x * (d_r * sum_j sc_rj (q . y)_j - dmin_r * sum_j m_rj sum(y)_j),
// the scalar reference's formula (the integers are exact, so the bits are
// those of the kernel before this layout of the loop), each lane adding its
// row's super-blocks in order, so a row's result does not depend on its group
// or the column count.

#if defined(TESSERA_OPS_KQUANT_GROUPS_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_VNNI_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_VNNI_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include "ops/vnni_target.h"

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
// Highway 1.0.3 compiles this target for AVX-VNNI (the VEX form); the CPUs it
// selects it on have AVX512-VNNI, whose EVEX form the 512-bit dpbusd needs.
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace kgroups {

constexpr int kMaxCols = 4;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
template <int C>
void q4_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    using namespace q4k_group;
    const __m512i low = _mm512_set1_epi8(0x0F);
    // int16 lane 2r: element r of the low half, lane 2r + 1: element r of the high half.
    const __m512i kInterleaveHalves = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const Ahead near = near_prefetch(QuantType::Q4_K);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kBlockBytes;
            // The prefetch is spread over the super-block, a chunk's lines
            // per chunk: asking for all 37 lines at once streamed 1.09x
            // slower at 1 thread and 1.13x at 2 (Zen 5; the burst seems to
            // outrun the misses the core keeps in flight, so some are dropped).
            prefetch_ahead(p, kQs, near);
            __m512i scaled[C], mins[C];
            for (int c = 0; c < C; ++c) scaled[c] = mins[c] = _mm512_setzero_si512();
            // Mins: sub-blocks 2h and 2h + 1 at once, lane r holding the
            // int16 pair (m_r,2h, m_r,2h+1) against the column's pair of
            // sub-block sums (each |sum| <= 32 * 128, an int16), one dpwssd.
            __m512i min_pairs[4];
            for (int h = 0; h < 4; ++h) {
                const __m512i m = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kMins + 32 * h)));
                min_pairs[h] = _mm512_permutexvar_epi16(kInterleaveHalves, m);
            }
            for (int c = 0; c < C; ++c) {
                // Dword j: sum_j = bsums[2j] + bsums[2j + 1]; packed to int16,
                // dwords 0, 1, 4, 5 are the pairs (sum_0, sum_1) .. (sum_6, sum_7).
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c * x_stride + b * kQ8KBytes + kQ8KBsums));
                const __m256i sub_sums = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));
                const __m512i sum_pairs = _mm512_castsi256_si512(_mm256_packs_epi32(sub_sums, sub_sums));
                for (int h = 0; h < 4; ++h) {
                    const __m512i pair = _mm512_permutexvar_epi32(_mm512_set1_epi32(h < 2 ? h : h + 2), sum_pairs);
                    mins[c] = _mm512_dpwssd_epi32(mins[c], min_pairs[h], pair);
                }
            }
            for (int h = 0; h < 4; ++h) {
                // Chunk h: low nibbles are sub-block 2h, high nibbles (left in
                // place, 16 x their value; the sum is shifted down once, exactly)
                // sub-block 2h + 1; two independent dpbusd chains per column.
                const uint8_t* chunk = p + kQs + 512 * h;
                prefetch_ahead(chunk, 512, near);
                __m512i s_lo[C], s_hi[C];
                for (int c = 0; c < C; ++c) s_lo[c] = s_hi[c] = _mm512_setzero_si512();
                for (int k = 0; k < 8; ++k) {
                    // Lane r: row r's codes 32(2h) + 4k .. + 3 (low), 32(2h + 1) + 4k .. (high).
                    __m512i q = _mm512_loadu_si512(chunk + 64 * k);
                    TESSERA_PIN_REGISTER(q);  // one load for both nibbles (ops/register_pin.h)
                    const __m512i w_lo = _mm512_and_si512(q, low), w_hi = _mm512_andnot_si512(low, q);
                    for (int c = 0; c < C; ++c) {
                        const uint8_t* xq = x + c * x_stride + b * kQ8KBytes + kQ8KQs + 64 * h + 4 * k;
                        int32_t y4[2];
                        std::memcpy(&y4[0], xq, 4);
                        std::memcpy(&y4[1], xq + 32, 4);
                        s_lo[c] = _mm512_dpbusd_epi32(s_lo[c], w_lo, _mm512_set1_epi32(y4[0]));
                        s_hi[c] = _mm512_dpbusd_epi32(s_hi[c], w_hi, _mm512_set1_epi32(y4[1]));
                    }
                }
                const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kScales + 32 * h)));
                const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kScales + 32 * h + 16)));
                for (int c = 0; c < C; ++c) {
                    scaled[c] = _mm512_add_epi32(scaled[c], _mm512_mullo_epi32(s_lo[c], sc_lo));
                    scaled[c] = _mm512_add_epi32(scaled[c], _mm512_mullo_epi32(_mm512_srai_epi32(s_hi[c], 4), sc_hi));
                }
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kDmin)));
            for (int c = 0; c < C; ++c) {
                float dx;
                std::memcpy(&dx, x + c * x_stride + b * kQ8KBytes, 4);
                const __m512 block = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(mins[c]),
                                                      _mm512_mul_ps(d, _mm512_cvtepi32_ps(scaled[c])));
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), block, acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
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

}  // namespace kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
