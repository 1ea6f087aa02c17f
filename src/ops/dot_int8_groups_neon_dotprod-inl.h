// Q4_0 and Q8_0 in the group layout (ops/row_groups.h) with ARM's dot-product
// extension (sdot; ops/int8_dot_extension.h), for Highway's NEON target on
// 64-bit ARM CPUs that have it. Included by dot_hwy.cpp once per target
// (hence the toggling include guard), inside nothing.
//
// A group's block holds its 16 rows' codes in chunks of 4 bytes per row, so
// a 128-bit vector of a chunk holds 4 rows (one per int32 lane) and vdotq_s32
// adds each row's 4 products with the column's 4 activation bytes into its
// lane. Chunk K (0..7) pairs with activations 4K..4K+3:
// - Q4_0: chunks 0..3 are the bytes' low nibbles (codes 4k..), 4..7 their
//   high nibbles (codes 16 + 4k..); nibbles 0..15 as they are, then the
//   offset of 8 costs -8 * sum(y).
// - Q8_0: the stored code + 128 XOR 0x80 is the signed code again.
// Every integer sum is exact and the float step is the canonical one
// (vec_dot_groups_canonical): the bits equal every other target's.

#if defined(TESSERA_OPS_DOT_INT8_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_DOT_INT8_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/group_tiles.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"
#include "util/fp16.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
// Only these functions may use sdot (callers check
// int8_dot_extension_enabled() first).
TESSERA_DOTPROD_PUSH
namespace tessera {
namespace HWY_NAMESPACE {
namespace dotprod_groups {

// Up to 4 columns per kernel call (int8_vec_dot_groups below): 4 accumulators per column (one per 4 rows) and a
// quad's 8 weight vectors fit the 32 registers.

inline int8x16_t broadcast4(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <bool kQ4, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    constexpr int64_t kGroupBlockBytes = kQ4 ? 288 : 544, kScaleBytes = 32, kActBlockBytes = 34;
    const uint8x16_t low = vdupq_n_u8(0x0F), flip = vdupq_n_u8(0x80);
    const Ahead near = near_prefetch(kQ4 ? QuantType::Q4_0 : QuantType::Q8_0);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        float32x4_t acc[C][4];
        for (int c = 0; c < C; ++c) {
            for (int q = 0; q < 4; ++q) acc[c][q] = accumulate ? vld1q_f32(y + c * y_stride + 4 * q) : vdupq_n_f32(0.0f);
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupBlockBytes;
            prefetch_ahead(p, kGroupBlockBytes, near);
            float dx[C];
            for (int c = 0; c < C; ++c) {
                uint16_t hx;
                std::memcpy(&hx, x + c * x_stride + b * kActBlockBytes, 2);
                dx[c] = fp16_to_fp32(hx);
            }
            for (int q = 0; q < 4; ++q) {
                uint16_t h4[4];
                std::memcpy(h4, p + 8 * q, 8);
                const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h4)));
                // w[K]: rows 4q..4q+3, codes 4K..4K+3, as signed bytes.
                int8x16_t w[8];
                for (int k = 0; k < (kQ4 ? 4 : 8); ++k) {
                    const uint8x16_t v = vld1q_u8(p + kScaleBytes + 64 * k + 16 * q);
                    if constexpr (kQ4) {
                        w[k] = vreinterpretq_s8_u8(vandq_u8(v, low));
                        w[k + 4] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                    } else {
                        w[k] = vreinterpretq_s8_u8(veorq_u8(v, flip));
                    }
                }
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xq = x + c * x_stride + b * kActBlockBytes + 2;
                    int32x4_t s = vdupq_n_s32(kQ4 ? -8 * sums[c * sums_stride + b] : 0);
                    for (int k = 0; k < 8; ++k) s = vdotq_s32(s, w[k], broadcast4(xq + 4 * k));
                    const float32x4_t scale = vmulq_f32(dw, vdupq_n_f32(dx[c]));
                    acc[c][q] = vfmaq_f32(acc[c][q], vcvtq_f32_s32(s), scale);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int q = 0; q < 4; ++q) vst1q_f32(y + c * y_stride + 4 * q, acc[c][q]);
        }
    }
}

// QuantTraits::vec_dot_groups for Q4_0 (kQ4) and Q8_0.
template <bool kQ4>
constexpr VecDotGroupsFn int8_vec_dot_groups =
    int8_group_entry<32, group_kernel<kQ4, 1>, group_kernel<kQ4, 2>, group_kernel<kQ4, 3>, group_kernel<kQ4, 4>>;

}  // namespace dotprod_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
