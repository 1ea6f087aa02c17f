// IQ4_XS weights in the group layout (ops/row_groups.h) against Q8_K
// activations with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs
// that have it. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// Q4_K's kernel (kquant_groups_neon_dotprod-inl.h) with the 4-bit indices
// looked up in the grid: a 128-bit vector holds 4 rows' 4 bytes (one row per
// int32 lane), a byte table lookup (vqtbl1q_s8) turns each nibble into its
// signed grid value (kIq4nlValues), and one vdotq_s32 against the column's 4
// activation bytes, broadcast, adds 4 products to each row's lane. sdot
// multiplies signed by signed, so the portable kernel's (iq4xs_groups_hwy-
// inl.h) grid + 128 and its offset 128 sum_j s_j sum(y)_j are not needed:
// the same integer either way. Signed sub-block scales s - 32; the float
// step is the portable kernel's: the bits equal every other target's.

#if defined(TESSERA_OPS_IQ4XS_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ4XS_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_IQ4XS_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_IQ4XS_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/dotprod_group_loop-inl.h"

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/kquant_group_layout.h"
#include "ops/quant_blocks.h"
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
namespace dotprod_iq4xs {

// Rows [r0, r0 + 4) of super-block p, one column xb (a Q8_K block):
// sum_j s_j (v . y)_j, v the grid values, exact.
inline int32x4_t super_block_sum(const uint8_t* p, int r0, const uint8_t* xb) {
    using namespace iq4xs_group;
    using namespace dotprod_loop;
    using q4k_group::kQ8KQs;
    const uint8x16_t low = vdupq_n_u8(0x0F);
    const int8x16_t grid = vld1q_s8(kIq4nlValues);
    const int32x4_t bias = vdupq_n_s32(32);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    int32x4_t scaled = vdupq_n_s32(0);
    for (int h = 0; h < 4; ++h) {
        int32x4_t s_lo = vdupq_n_s32(0), s_hi = vdupq_n_s32(0);
        for (int k = 0; k < 8; ++k) {
            const uint8x16_t v = vld1q_u8(p + kQs + 512 * h + 64 * k + 4 * r0);
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            s_lo = vdotq_s32(s_lo, vqtbl1q_s8(grid, vandq_u8(v, low)), broadcast4(lo));
            s_hi = vdotq_s32(s_hi, vqtbl1q_s8(grid, vshrq_n_u8(v, 4)), broadcast4(lo + 32));
        }
        scaled = vmlaq_s32(scaled, s_lo, vsubq_s32(widen4_u8(p + kScales + 16 * (2 * h) + r0), bias));
        scaled = vmlaq_s32(scaled, s_hi, vsubq_s32(widen4_u8(p + kScales + 16 * (2 * h + 1) + r0), bias));
    }
    return scaled;
}

// QuantTraits::vec_dot_groups for IQ4_XS (x_sums unused: Q8_K has its bsums).
inline void iq4_xs_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                  size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                  float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    dotprod_loop::run<QuantType::IQ4_XS, 256, iq4xs_group::kBlockBytes, q4k_group::kQ8KBytes>(
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

}  // namespace dotprod_iq4xs
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
