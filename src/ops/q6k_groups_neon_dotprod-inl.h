// Q6_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs
// that have it. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// A 128-bit vector of a chunk holds 4 rows' 4 bytes (one row per int32
// lane): a nibble of each byte and its 2 top bits from the high-bit vector
// make the 6-bit codes (0..63, valid signed bytes), and one vdotq_s32 against
// the column's 4 activation bytes, broadcast, replaces the portable kernel's
// (q6k_groups_hwy-inl.h) shift, mask and multiply per code. The offset 32 is
// taken off as 32 sum_j sc_j sum(y)_j, as there. The integer sums are exact
// and the float step is the portable kernel's: the bits equal every other
// target's.

#if defined(TESSERA_OPS_Q6K_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q6K_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_Q6K_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_Q6K_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/dotprod_group_loop-inl.h"

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
// Only these functions may use sdot (callers check
// int8_dot_extension_enabled() first).
TESSERA_DOTPROD_PUSH
namespace tessera {
namespace HWY_NAMESPACE {
namespace dotprod_q6k {

// Rows [r0, r0 + 4) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j ((q - 32) . y)_j, exact.
inline int32x4_t super_block_sum(const uint8_t* p, int r0, const uint8_t* xb) {
    using namespace q6k_group;
    using namespace dotprod_loop;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    const uint8x16_t low = vdupq_n_u8(0x0F), top = vdupq_n_u8(0x30);
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    int32x4_t offset = vdupq_n_s32(0);
    for (int j = 0; j < 16; ++j) offset = vmlaq_n_s32(offset, widen4_s8(p + kScales + 16 * j + r0), bsums[j]);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    int32x4_t total = vdupq_n_s32(0);
    for (int h = 0; h < 4; ++h) {
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        // s[0], s[1]: the low nibbles' sub-blocks 4h, 4h + 1; s[2], s[3]: the high nibbles' 4h + 2, 4h + 3.
        int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int m = 0; m < 4; ++m) {
            // Top bits of vector 2m's low, high, vector 2m + 1's low, high nibble at bits 0, 2, 4, 6.
            const uint8x16_t hv = vld1q_u8(chunk + kHighs + 64 * m + 4 * r0);
            const uint8x16_t tops[4] = {vandq_u8(vshlq_n_u8(hv, 4), top), vandq_u8(vshlq_n_u8(hv, 2), top),
                                        vandq_u8(hv, top), vandq_u8(vshrq_n_u8(hv, 2), top)};
            for (int odd = 0; odd < 2; ++odd) {
                const int k = 2 * m + odd;
                const uint8x16_t v = vld1q_u8(chunk + 64 * k + 4 * r0);
                const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, low), tops[2 * odd]));
                const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), tops[2 * odd + 1]));
                const int8_t* y = xq + 64 * h + 4 * k;
                s[k / 4] = vdotq_s32(s[k / 4], lo, broadcast4(y));
                s[2 + k / 4] = vdotq_s32(s[2 + k / 4], hi, broadcast4(y + 32));
            }
        }
        for (int j = 0; j < 4; ++j) total = vmlaq_s32(total, s[j], widen4_s8(p + kScales + 16 * (4 * h + j) + r0));
    }
    return vsubq_s32(total, vshlq_n_s32(offset, 5));
}

// QuantTraits::vec_dot_groups for Q6_K (x_sums unused: Q8_K has its bsums).
inline void q6_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    dotprod_loop::run<QuantType::Q6_K, 256, q6k_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xblock, float32x4_t acc) {
            const int32x4_t sum = super_block_sum(p, r0, xblock);
            const float32x4_t d = dotprod_loop::fp16x4(p + 2 * r0);
            float dx;
            std::memcpy(&dx, xblock, 4);
            // The canonical step: acc = fma(dx, d * sum, acc).
            return vfmaq_f32(acc, vdupq_n_f32(dx), vmulq_f32(d, vcvtq_f32_s32(sum)));
        });
}

}  // namespace dotprod_q6k
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
