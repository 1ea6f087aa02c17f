// Q5_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs
// that have it. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// Q4_K's kernel (kquant_groups_neon_dotprod-inl.h) with each code's fifth
// bit from the chunk's high-bit vectors: a 128-bit vector holds 4 rows' 4
// bytes (one row per int32 lane); a nibble of each byte or-ed with 16 where
// its bit is set (vtstq) is a code 0..31, a valid signed byte, and one
// vdotq_s32 against the column's 4 activation bytes, broadcast, replaces the
// portable kernel's (q5k_groups_hwy-inl.h) shift, mask and multiply per code.
// The integer sums are exact and the float step is the portable kernel's:
// the bits equal every other target's.

#if defined(TESSERA_OPS_Q5K_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q5K_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_Q5K_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_Q5K_GROUPS_NEON_DOTPROD_INL_H_
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
namespace dotprod_q5k {

// Rows [r0, r0 + 4) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j (q . y)_j into scaled, and sum_j m_j sum(y)_j into mins.
inline void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, int32x4_t& scaled, int32x4_t& mins) {
    using namespace q5k_group;
    using namespace dotprod_loop;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    const uint8x16_t low = vdupq_n_u8(0x0F), bit4 = vdupq_n_u8(0x10);
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    mins = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
        mins = vmlaq_n_s32(mins, widen4_u8(p + kMins + 16 * j + r0), bsums[2 * j] + bsums[2 * j + 1]);
    }
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    scaled = vdupq_n_s32(0);
    for (int h = 0; h < 4; ++h) {
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        int32x4_t s_lo = vdupq_n_s32(0), s_hi = vdupq_n_s32(0);
        for (int k = 0; k < 8; ++k) {
            // Byte i's bit 2t (t = k % 4): the fifth bit of its low nibble's code, bit 2t + 1 of its high's.
            const uint8x16_t hv = vld1q_u8(chunk + kHighs + 64 * (k / 4) + 4 * r0);
            const int t = k % 4;
            const uint8x16_t v = vld1q_u8(chunk + 64 * k + 4 * r0);
            const uint8x16_t fifth_lo = vandq_u8(vtstq_u8(hv, vdupq_n_u8(static_cast<uint8_t>(1u << (2 * t)))), bit4);
            const uint8x16_t fifth_hi = vandq_u8(vtstq_u8(hv, vdupq_n_u8(static_cast<uint8_t>(2u << (2 * t)))), bit4);
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            s_lo = vdotq_s32(s_lo, vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, low), fifth_lo)), broadcast4(lo));
            s_hi = vdotq_s32(s_hi, vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), fifth_hi)), broadcast4(lo + 32));
        }
        scaled = vmlaq_s32(scaled, s_lo, widen4_u8(p + kScales + 16 * (2 * h) + r0));
        scaled = vmlaq_s32(scaled, s_hi, widen4_u8(p + kScales + 16 * (2 * h + 1) + r0));
    }
}

// QuantTraits::vec_dot_groups for Q5_K (x_sums unused: Q8_K has its bsums).
inline void q5_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    dotprod_loop::run<QuantType::Q5_K, 256, q5k_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xblock, float32x4_t acc) {
            int32x4_t scaled, mins;
            super_block_sums(p, r0, xblock, scaled, mins);
            const float32x4_t d = dotprod_loop::fp16x4(p + 2 * r0);
            const float32x4_t dmin = dotprod_loop::fp16x4(p + q5k_group::kDmin + 2 * r0);
            float dx;
            std::memcpy(&dx, xblock, 4);
            // The canonical step: block = fma(-dmin, mins, d * scaled); acc = fma(dx, block, acc).
            const float32x4_t block =
                vfmaq_f32(vmulq_f32(d, vcvtq_f32_s32(scaled)), vnegq_f32(dmin), vcvtq_f32_s32(mins));
            return vfmaq_f32(acc, vdupq_n_f32(dx), block);
        });
}

}  // namespace dotprod_q5k
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
