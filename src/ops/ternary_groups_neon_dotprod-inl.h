// Q2_0, TQ2_0 and TQ1_0 weights in their group layouts (q1_0_group_layout.h,
// ternary_group_layout.h) with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs that
// have it. Included by ternary_hwy.cpp once per target (hence the toggling
// include guard), inside nothing. Raw NEON: Highway 1.0.3's ops cannot be
// inlined into functions compiled with the extension.
//
// A 128-bit vector of a word holds 4 rows' 4 code bytes (one row per int32
// lane); code l of each byte (2 bits shifted by 2l; TQ1_0's trit l, negated,
// from two comparisons of uint8(b * 3^l)) is a valid signed byte, and one
// vdotq_s32 against the column's 4 activation bytes replaces the portable
// kernel's shift, mask and multiply per byte (ternary_hwy.cpp). Q2_0's
// activations are transposed 4 x 4 by one table lookup per 16 codes, each
// word then a lane of the result (vdotq_laneq_s32). The activation sums are
// taken per step (Q8_K: from its bsums). The integer sums are exact and the
// float step is the portable kernel's: the bits equal every other target's.

#if defined(TESSERA_OPS_TERNARY_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_TERNARY_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_TERNARY_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_TERNARY_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/dotprod_group_loop-inl.h"

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/kquant_blocks.h"
#include "ops/kquant_group_layout.h"
#include "ops/q1_0_group_layout.h"
#include "ops/q2_0_scalar.h"
#include "ops/row_groups.h"
#include "ops/ternary_group_layout.h"
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
namespace dotprod_ternary {

// Word k of rows r0.. (4 rows' 4 bytes) of a group block whose words start at words_at.
inline uint8x16_t load_word(const uint8_t* p, int64_t words_at, int k, int r0) {
    return vld1q_u8(p + words_at + 64 * k + 4 * r0);
}

// Code l of 2-bit codes: bits 2l, 2l + 1 of each byte.
inline int8x16_t bit_pair(uint8x16_t v, int l) {
    return vreinterpretq_s8_u8(vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * l))), vdupq_n_u8(3)));
}

// TQ1_0's trits, negated: trit l of a byte b is [m > 85] + [m > 170] with
// m = uint8(b * 3^l) (m steps to the next trit as uint8(3 m)), and the two
// comparisons' all-ones bytes add to -trit as signed bytes: two compares and
// an add instead of two widening multiplies and narrowing shifts.
inline int8x16_t negated_trit(uint8x16_t m) {
    return vreinterpretq_s8_u8(vaddq_u8(vcgtq_u8(m, vdupq_n_u8(85)), vcgtq_u8(m, vdupq_n_u8(170))));
}

// The canonical step of a block: acc = fma(float(s), d_w * d_x, acc).
inline float32x4_t block_step(int32x4_t s, const uint8_t* scales, int r0, float dx, float32x4_t acc) {
    return vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_f32(dotprod_loop::fp16x4(scales + 2 * r0), vdupq_n_f32(dx)));
}

// QuantTraits::vec_dot_groups for Q2_0 (64-element blocks against two Q8_0 blocks).
inline void q2_0_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    // Byte 4l + b of a 16-code chunk's transpose: code 4b + l (word l's byte b).
    static constexpr uint8_t kTranspose[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    dotprod_loop::run<QuantType::Q2_0, kQ2_0Block, q1_0_group::kBytes, 2 * static_cast<int64_t>(sizeof(BlockQ8_0))>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xb, float32x4_t acc) {
            const uint8x16_t transpose = vld1q_u8(kTranspose);
            for (int h = 0; h < 2; ++h) {
                const uint8_t* xh = xb + h * static_cast<int64_t>(sizeof(BlockQ8_0));
                const int8x16_t x0 = vld1q_s8(reinterpret_cast<const int8_t*>(xh + 2));
                const int8x16_t x1 = vld1q_s8(reinterpret_cast<const int8_t*>(xh + 18));
                // A chain of sdot per word: one chain of 8 was bound by
                // their latency; integers, so the sum is exact either way.
                int32x4_t s[2] = {vdupq_n_s32(-(vaddlvq_s8(x0) + vaddlvq_s8(x1))), vdupq_n_s32(0)};
                for (int wi = 0; wi < 2; ++wi) {
                    const int8x16_t t = vqtbl1q_s8(wi == 0 ? x0 : x1, transpose);
                    const uint8x16_t v = load_word(p, q1_0_group::kQs, 2 * h + wi, r0);
                    s[wi] = vdotq_laneq_s32(s[wi], bit_pair(v, 0), t, 0);
                    s[wi] = vdotq_laneq_s32(s[wi], bit_pair(v, 1), t, 1);
                    s[wi] = vdotq_laneq_s32(s[wi], bit_pair(v, 2), t, 2);
                    s[wi] = vdotq_laneq_s32(s[wi], bit_pair(v, 3), t, 3);
                }
                uint16_t dx;
                std::memcpy(&dx, xh, 2);
                acc = block_step(vaddq_s32(s[0], s[1]), p, r0, fp16_to_fp32(dx), acc);
            }
            return acc;
        });
}

// The integer sum of a TQ2_0 (kTq1 false) or TQ1_0 block's rows r0.. against
// a Q8_K block: sum(q x) - sum(x).
template <bool kTq1>
inline int32x4_t ternary_block_sum(const uint8_t* p, int r0, const uint8_t* xb) {
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    const auto* q = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    const int32_t x_sum = vaddlvq_s16(vld1q_s16(bsums)) + vaddlvq_s16(vld1q_s16(bsums + 8));
    // Code l's sums in chain l % 2 (TQ1_0's negated): one chain of 64 sdot
    // was bound by their latency; integers, so the sum is exact either way.
    int32x4_t s[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    if constexpr (!kTq1) {
        // Word k: elements 128 (k / 8) + 32 l + 4 (k % 8) + b.
        for (int k = 0; k < ternary_group::kTq2_0Words; ++k) {
            const uint8x16_t v = load_word(p, ternary_group::kWords, k, r0);
            const int8_t* xk = q + 128 * (k / 8) + 4 * (k % 8);
            for (int l = 0; l < 4; ++l) {
                s[l % 2] = vdotq_s32(s[l % 2], bit_pair(v, l), dotprod_loop::broadcast4(xk + 32 * l));
            }
        }
        return vsubq_s32(vaddq_s32(s[0], s[1]), vdupq_n_s32(x_sum));
    } else {
        // Words 0-7: elements 32 l + 4k + b; 8-11: 160 + 16 l + 4(k - 8) + b;
        // 12 (qh): 240 + 4 l + b, 4 trits.
        for (int k = 0; k < ternary_group::kTq1_0Words; ++k) {
            uint8x16_t m = load_word(p, ternary_group::kWords, k, r0);
            const int8_t* xk = k < 8 ? q + 4 * k : k < 12 ? q + 160 + 4 * (k - 8) : q + 240;
            const int stride = k < 8 ? 32 : k < 12 ? 16 : 4;
            const int n_trits = k < 12 ? 5 : 4;
            for (int l = 0; l < n_trits; ++l) {
                if (l > 0) m = vmulq_u8(m, vdupq_n_u8(3));
                s[l % 2] = vdotq_s32(s[l % 2], negated_trit(m), dotprod_loop::broadcast4(xk + stride * l));
            }
        }
        return vsubq_s32(vdupq_n_s32(-x_sum), vaddq_s32(s[0], s[1]));
    }
}

// QuantTraits::vec_dot_groups for TQ1_0 (kTq1) and TQ2_0.
template <bool kTq1>
void ternary_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                            size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                            size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr int64_t kBytes = ternary_group::bytes_of(kTq1 ? ternary_group::kTq1_0Words : ternary_group::kTq2_0Words);
    dotprod_loop::run<kTq1 ? QuantType::TQ1_0 : QuantType::TQ2_0, kQK_K, kBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xb, float32x4_t acc) {
            float dx;
            std::memcpy(&dx, xb, 4);
            return block_step(ternary_block_sum<kTq1>(p, r0, xb), p, r0, dx, acc);
        });
}

}  // namespace dotprod_ternary
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
