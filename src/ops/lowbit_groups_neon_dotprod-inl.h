// Q2_K and Q3_K weights in the group layout (ops/kquant_group_layout.h)
// against Q8_K activations with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs
// that have it. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// A 128-bit vector of a chunk holds 4 rows' 4 bytes (one row per int32
// lane); bits 2t, 2t + 1 of each byte are the codes of step t (and Q3_K's
// third bit a vtstq of the high-bit vector away): codes 0..3 (0..7), valid
// signed bytes, and one vdotq_s32 against the column's 4 activation bytes,
// broadcast, replaces the portable kernel's (lowbit_groups_hwy-inl.h) shift,
// mask and multiply per code. The constant parts (Q2_K's mins, Q3_K's
// offset 4) are taken off as there. The integer sums are exact and the float
// step is the portable kernel's: the bits equal every other target's.

#if defined(TESSERA_OPS_LOWBIT_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_LOWBIT_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_LOWBIT_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_LOWBIT_GROUPS_NEON_DOTPROD_INL_H_
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
namespace dotprod_lowbit {

// Rows [r0, r0 + 4) of super-block p, one column xb (a Q8_K block): the
// scaled sum sum_j sc_j (u . y)_j and the constant part's sum_j c_j sum(y)_j
// (Q2_K: c the mins; Q3_K: c the scales s - 32), exact.
template <bool kQ3>
inline void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, int32x4_t& scaled, int32x4_t& constant) {
    using namespace dotprod_loop;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    constexpr int64_t kScales = kQ3 ? q3k_group::kScales : q2k_group::kScales;
    constexpr int64_t kQs = kQ3 ? q3k_group::kQs : q2k_group::kQs;
    constexpr int64_t kChunkBytes = kQ3 ? q3k_group::kChunkBytes : q2k_group::kChunkBytes;
    const uint8x16_t two_bits = vdupq_n_u8(3), bit2 = vdupq_n_u8(4);
    const int32x4_t bias = vdupq_n_s32(32), low4 = vdupq_n_s32(0x0F);
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    // Sub-block j's scale factor (Q2_K: the byte's low nibble; Q3_K: s - 32).
    const auto scale_of = [&](int j) {
        const int32x4_t bytes = widen4_u8(p + kScales + 16 * j + r0);
        return kQ3 ? vsubq_s32(bytes, bias) : vandq_s32(bytes, low4);
    };
    constant = vdupq_n_s32(0);
    for (int j = 0; j < 16; ++j) {
        const int32x4_t c = kQ3 ? scale_of(j) : vshrq_n_s32(widen4_u8(p + kScales + 16 * j + r0), 4);
        constant = vmlaq_n_s32(constant, c, bsums[j]);
    }
    scaled = vdupq_n_s32(0);
    for (int h = 0; h < 4; ++h) {
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        uint8x16_t hv[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if constexpr (kQ3) {
            hv[0] = vld1q_u8(chunk + q3k_group::kHighs + 4 * r0);
            hv[1] = vld1q_u8(chunk + q3k_group::kHighs + 64 + 4 * r0);
        }
        int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int m = 0; m < 4; ++m) {
            const uint8x16_t v = vld1q_u8(chunk + 64 * m + 4 * r0);
            for (int t = 0; t < 4; ++t) {
                // Elements 64h + 16t + 4m + i: bits 2t, 2t + 1 of byte i.
                uint8x16_t u = vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * t))), two_bits);
                if constexpr (kQ3) {
                    const int step = 4 * m + t;
                    const uint8x16_t high = vtstq_u8(hv[step / 8], vdupq_n_u8(static_cast<uint8_t>(1u << (step % 8))));
                    u = vorrq_u8(u, vandq_u8(high, bit2));
                }
                s[t] = vdotq_s32(s[t], vreinterpretq_s8_u8(u), broadcast4(xq + 64 * h + 16 * t + 4 * m));
            }
        }
        for (int t = 0; t < 4; ++t) scaled = vmlaq_s32(scaled, s[t], scale_of(4 * h + t));
    }
}

// QuantTraits::vec_dot_groups for Q3_K (kQ3) and Q2_K (x_sums unused: Q8_K has its bsums).
template <bool kQ3>
void lowbit_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr int64_t kBlockBytes = kQ3 ? q3k_group::kBlockBytes : q2k_group::kBlockBytes;
    dotprod_loop::run<kQ3 ? QuantType::Q3_K : QuantType::Q2_K, 256, kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xblock, float32x4_t acc) {
            int32x4_t scaled, constant;
            super_block_sums<kQ3>(p, r0, xblock, scaled, constant);
            const float32x4_t d = dotprod_loop::fp16x4(p + 2 * r0);
            float dx;
            std::memcpy(&dx, xblock, 4);
            if constexpr (kQ3) {
                // The canonical step: acc = fma(dx, d * (scaled - 4 constant), acc).
                const int32x4_t sum = vsubq_s32(scaled, vshlq_n_s32(constant, 2));
                return vfmaq_f32(acc, vdupq_n_f32(dx), vmulq_f32(d, vcvtq_f32_s32(sum)));
            } else {
                // block = fma(-dmin, constant, d * scaled); acc = fma(dx, block, acc).
                const float32x4_t dmin = dotprod_loop::fp16x4(p + q2k_group::kDmin + 2 * r0);
                const float32x4_t block =
                    vfmaq_f32(vmulq_f32(d, vcvtq_f32_s32(scaled)), vnegq_f32(dmin), vcvtq_f32_s32(constant));
                return vfmaq_f32(acc, vdupq_n_f32(dx), block);
            }
        });
}

}  // namespace dotprod_lowbit
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
