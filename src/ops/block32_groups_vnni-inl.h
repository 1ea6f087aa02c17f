// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights in the group layout
// (ops/block32_group_layout.h) against Q8_0 activations with AVX-512 VNNI
// (target AVX3_DL): Q4_0's kernel (dot_int8_vnni-inl.h) with each code's
// fifth bit from the block's high-bit vector (Q5_0, Q5_1) or its index looked
// up in the grid by a byte shuffle (IQ4_NL, MXFP4), the codes' offset taken
// off as offset x sum(y). Then the canonical step (row_groups.h):
//   Q5_0, IQ4_NL, MXFP4: acc = fma(float(s), d_w * d_x, acc)
//   Q5_1: acc = fma(d_x, fma(m_w, float(sum y), d_w * float(s)), acc)
// Included by dot_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_BLOCK32_GROUPS_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_BLOCK32_GROUPS_VNNI_INL_H_
#undef TESSERA_OPS_BLOCK32_GROUPS_VNNI_INL_H_
#else
#define TESSERA_OPS_BLOCK32_GROUPS_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include "ops/block32_group_layout.h"
#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include "ops/vnni_target.h"

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace block32_vnni {

constexpr int kMaxCols = 4;

// The fifth bits of vector k's low (kHigh = 0) or high nibbles, at bit 4.
template <int k, int kHigh>
HWY_INLINE __m512i fifth_bits(__m512i hv) {
    constexpr int from = 2 * k + kHigh;
    if constexpr (from < 4) return _mm512_slli_epi16(hv, 4 - from);
    else if constexpr (from == 4) return hv;
    else return _mm512_srli_epi16(hv, from - 4);
}

template <QuantType kType, int C>
void block32_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                          const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                          bool accumulate) {
    using namespace block32_group;
    static constexpr Layout L = kType == QuantType::Q5_0 ? kQ5_0 : kType == QuantType::Q5_1 ? kQ5_1 : kType == QuantType::Q4_1 ? kQ4_1
                              : kType == QuantType::IQ4_NL ? kIQ4_NL : kMXFP4;
    constexpr int32_t kOffset = kType == QuantType::Q5_0 ? 16 : kType == QuantType::IQ4_NL ? 128
                              : kType == QuantType::MXFP4 ? 12 : 0;
    constexpr int64_t kActBlockBytes = 34;
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(kType == QuantType::MXFP4 ? kMxfp4Plus12 : kIq4nlPlus128)));
    const Ahead near = near_prefetch(kType);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * L.bytes;
            prefetch_ahead(p, L.bytes, near);
            // w[k] lane r: row r's codes 4k..4k+3; w[k + 4]: 16 + 4k..
            __m512i w[8];
            __m512i hv = L.highs != 0 ? _mm512_loadu_si512(p + L.highs) : _mm512_setzero_si512();
            if constexpr (L.highs != 0) TESSERA_PIN_REGISTER(hv);  // one load each (ops/register_pin.h)
            for (int k = 0; k < 4; ++k) {
                __m512i q = _mm512_loadu_si512(p + L.qs + 64 * k);
                TESSERA_PIN_REGISTER(q);
                const __m512i lo = _mm512_and_si512(q, low);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
                if constexpr (L.highs != 0) {
                    __m512i lo_top, hi_top;
                    switch (k) {
                        case 0: lo_top = fifth_bits<0, 0>(hv); hi_top = fifth_bits<0, 1>(hv); break;
                        case 1: lo_top = fifth_bits<1, 0>(hv); hi_top = fifth_bits<1, 1>(hv); break;
                        case 2: lo_top = fifth_bits<2, 0>(hv); hi_top = fifth_bits<2, 1>(hv); break;
                        default: lo_top = fifth_bits<3, 0>(hv); hi_top = fifth_bits<3, 1>(hv); break;
                    }
                    w[k] = _mm512_or_si512(lo, _mm512_and_si512(lo_top, bit4));
                    w[k + 4] = _mm512_or_si512(hi, _mm512_and_si512(hi_top, bit4));
                } else if constexpr (kType == QuantType::Q4_1) {
                    w[k] = lo;
                    w[k + 4] = hi;
                } else {
                    w[k] = _mm512_shuffle_epi8(grid, lo);
                    w[k + 4] = _mm512_shuffle_epi8(grid, hi);
                }
            }
            __m512 dw;
            if constexpr (kType == QuantType::MXFP4) {
                // 2^(e - 128): (e - 1) << 23, or the subnormals 2^-128, 2^-127 for e < 2.
                const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
                const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
                const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
                const __mmask16 is_tiny = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
                dw = _mm512_castsi512_ps(_mm512_mask_mov_epi32(normal, is_tiny, tiny));
            } else {
                dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            }
            for (int c = 0; c < C; ++c) {
                const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                const int32_t ysum = sums[c * sums_stride + b];
                __m512i s = _mm512_set1_epi32(-kOffset * ysum), s2 = _mm512_setzero_si512();
                for (int j = 0; j < 4; ++j) {
                    int32_t y4[2];
                    std::memcpy(&y4[0], xb + 2 + 4 * j, 4);
                    std::memcpy(&y4[1], xb + 2 + 16 + 4 * j, 4);
                    s = _mm512_dpbusd_epi32(s, w[j], _mm512_set1_epi32(y4[0]));
                    s2 = _mm512_dpbusd_epi32(s2, w[j + 4], _mm512_set1_epi32(y4[1]));
                }
                s = _mm512_add_epi32(s, s2);
                uint16_t h;
                std::memcpy(&h, xb, 2);
                const float dx = _cvtsh_ss(h);
                if constexpr (L.m != 0) {  // Q5_1, Q4_1: the min times the activations' sum
                    const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + L.m)));
                    const __m512 block = _mm512_fmadd_ps(m, _mm512_set1_ps(static_cast<float>(ysum)),
                                                         _mm512_mul_ps(dw, _mm512_cvtepi32_ps(s)));
                    acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx), block, acc[c]);
                } else {
                    acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[c]);
                }
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
    }
}

// QuantTraits::vec_dot_groups for the type.
template <QuantType kType>
void block32_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                            size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                            size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxCols] = {
        block32_group_kernel<kType, 1>, block32_group_kernel<kType, 2>, block32_group_kernel<kType, 3>,
        block32_group_kernel<kType, 4>};
    run_int8_group_tiles(kernels, n, w, group_stride, n_groups, x, x_stride, x_sums, sums_stride, n_cols, y,
                         y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace block32_vnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
