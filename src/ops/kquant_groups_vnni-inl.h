// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX-512 VNNI (target AVX3_DL): 16 rows per vector, one row
// per 32-bit lane. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// Per sub-block j of 32 elements, 8 loads give row r's 32 codes in lane r
// (4 per dpbusd, unsigned 0..15) against 4 of the column's activation bytes
// (signed) broadcast to every lane; the lane's integer sum is multiplied by
// its row's 6-bit scale (stored unpacked, one widening load per sub-block)
// and added up over the super-block, as is min x the sub-block's activation
// sum (two of Q8_K's bsums). The float scales apply once per super-block:
//   y_r += d_x * (d_r * sum_j sc_rj (q . y)_j - dmin_r * sum_j m_rj sum(y)_j),
// the scalar reference's formula, each lane adding its row's super-blocks in
// order, so a row's result does not depend on its group or the column count.

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
#include "ops/row_groups.h"

HWY_BEFORE_NAMESPACE();
// Highway 1.0.3 compiles this target for AVX-VNNI (the VEX form); the CPUs it
// selects it on have AVX512-VNNI, whose EVEX form the 512-bit dpbusd needs.
#pragma GCC target("avx512vnni")
namespace tessera {
namespace HWY_NAMESPACE {
namespace kgroups {

constexpr int kRows = 16;
constexpr int kMaxCols = 4;
// Offsets within a super-block of a group and of a Q8_K block.
constexpr int64_t kGroupBlockBytes = 2368, kDmin = 32, kScales = 64, kMins = 192, kQs = 320;
constexpr int64_t kQ8KBytes = 292, kQ8KQs = 4, kQ8KBsums = 260;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
template <int C>
void q4_k_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride, float* y,
                       size_t y_stride, size_t unit_stride, bool accumulate) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupBlockBytes;
            prefetch_group_block(p, kGroupBlockBytes);
            __m512i scaled[C], mins[C];
            for (int c = 0; c < C; ++c) scaled[c] = mins[c] = _mm512_setzero_si512();
            for (int j = 0; j < 8; ++j) {
                // w[k] lane r: row r's codes 32j + 4k .. 32j + 4k + 3.
                const uint8_t* chunk = p + kQs + 512 * (j / 2);
                __m512i w[8];
                for (int k = 0; k < 8; ++k) {
                    const __m512i q = _mm512_loadu_si512(chunk + 64 * k);
                    w[k] = _mm512_and_si512(j % 2 == 0 ? q : _mm512_srli_epi16(q, 4), low);
                }
                const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kScales + 16 * j)));
                const __m512i m = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kMins + 16 * j)));
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xb = x + c * x_stride + b * kQ8KBytes;
                    __m512i s = _mm512_setzero_si512();
                    for (int k = 0; k < 8; ++k) {
                        int32_t y4;
                        std::memcpy(&y4, xb + kQ8KQs + 32 * j + 4 * k, 4);
                        s = _mm512_dpbusd_epi32(s, w[k], _mm512_set1_epi32(y4));
                    }
                    scaled[c] = _mm512_add_epi32(scaled[c], _mm512_mullo_epi32(s, sc));
                    int16_t bs[2];
                    std::memcpy(bs, xb + kQ8KBsums + 4 * j, 4);
                    mins[c] = _mm512_add_epi32(mins[c], _mm512_mullo_epi32(m, _mm512_set1_epi32(bs[0] + bs[1])));
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
    using Kernel = void (*)(int64_t, int64_t, const uint8_t*, const uint8_t*, size_t, float*, size_t, size_t, bool);
    static constexpr Kernel kernels[kMaxCols] = {q4_k_group_kernel<1>, q4_k_group_kernel<2>, q4_k_group_kernel<3>,
                                                 q4_k_group_kernel<4>};
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t unit_blocks = (unit_n > 0 && unit_n < n ? unit_n : n) / 256;
    for (int g = 0; g < n_groups; ++g) {
        for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
            const int cc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
            kernels[cc - 1](n / 256, unit_blocks, wb + g * group_stride, xb + c0 * x_stride, x_stride,
                            y + c0 * y_stride + g * kRows, y_stride, unit_stride, accumulate);
        }
    }
}

}  // namespace kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
