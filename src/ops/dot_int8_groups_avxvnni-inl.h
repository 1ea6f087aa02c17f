// Q4_0 and Q8_0 in the group layout (ops/row_groups.h) with AVX-VNNI, for the
// AVX2 target on CPUs that have it (ops/int8_dot_extension.h). Included by dot_hwy.cpp
// once per target (hence the toggling include guard), inside nothing.
//
// The layout and the loop are dot_int8_groups_avx2-inl.h's: a 256-bit vector
// holds a chunk of 4 codes for each of 8 rows, a block is two halves of 8
// rows. vpdpbusd multiplies a lane's 4 unsigned bytes by 4 signed activation
// bytes and adds them into the lane's int32, with no int16 step and no
// saturation, so one instruction replaces maddubs, madd and add:
// - Q4_0: nibbles (0..15) as they are; the offset of 8 costs -8 * sum(y).
// - Q8_0: the stored codes are code + 128 (unsigned); the offset costs
//   -128 * sum(y), so no sign handling is needed.
// The integers are the maddubs kernel's exactly, and the float steps the
// same: the bits equal every other target's (vec_dot_groups_canonical).

#if defined(TESSERA_OPS_DOT_INT8_GROUPS_AVXVNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_GROUPS_AVXVNNI_INL_H_
#undef TESSERA_OPS_DOT_INT8_GROUPS_AVXVNNI_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_GROUPS_AVXVNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX2

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"

#include <cstdint>
#include <cstring>

TESSERA_AVXVNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_AVXVNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace avxvnni_groups {

// Up to 4 columns per kernel call (int8_vec_dot_groups below): 2 accumulators per column and a block's 8 weight
// vectors fit the 16 registers.

HWY_INLINE __m256i broadcast4(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <bool kQ4, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    constexpr int64_t kGroupBlockBytes = kQ4 ? 288 : 544, kScaleBytes = 32, kActBlockBytes = 34;
    constexpr int32_t kOffset = kQ4 ? 8 : 128;
    const __m256i low = _mm256_set1_epi8(0x0F);
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
                // w[k]: the rows' codes 4k..4k+3, unsigned.
                __m256i w[8];
                if constexpr (kQ4) {
                    for (int k = 0; k < 4; ++k) {
                        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k));
                        w[k] = _mm256_and_si256(v, low);
                        w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                    }
                } else {
                    for (int k = 0; k < 8; ++k) w[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k));
                }
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                    __m256i s = _mm256_set1_epi32(-kOffset * sums[c * sums_stride + b]);
                    for (int k = 0; k < 8; ++k) s = _mm256_dpbusd_avx_epi32(s, w[k], broadcast4(xb + 2 + 4 * k));
                    uint16_t hx;
                    std::memcpy(&hx, xb, 2);
                    const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(hx)));
                    acc[c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[c][h]);
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

}  // namespace avxvnni_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_AVXVNNI_POP

#endif  // HWY_TARGET == HWY_AVX2
#endif  // include guard
