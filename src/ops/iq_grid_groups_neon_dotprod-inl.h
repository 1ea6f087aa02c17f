// The grid I-quants (IQ1 too) in the group layout (16 rows' blocks back to back) with
// ARM's dot-product extension (sdot; ops/int8_dot_extension.h), for
// Highway's NEON target on 64-bit ARM CPUs that have it. Included by
// iq_grids_hwy.cpp once per target (hence the toggling include guard),
// inside nothing.
//
// A row's block is not spread over lanes here, so sdot works within a row:
// the shared decoder (ops/iq_grid_decode.h) gives a 32-weight sub-block's 4
// points of 8 bytes and their sign masks; two points with their signs
// applied ((v ^ m) - m: grid values are at most 62, so valid signed bytes)
// are 16 weights of one scale, and one vdotq_s32 against the 16 activation
// bytes beside them replaces the portable kernel's (iq_grid_groups_hwy-
// inl.h) 16 sign tests and multiplies. The lookups stay scalar: they bound
// these types on every target. Each row's S is the decoder's exact integer
// and the float step is the portable kernel's: the bits equal every other
// target's.

#if defined(TESSERA_OPS_IQ_GRID_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ_GRID_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_IQ_GRID_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_IQ_GRID_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/dotprod_group_loop-inl.h"

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/group_tiles.h"
#include "ops/iq_grid_decode.h"
#include "ops/kquant_group_layout.h"
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
namespace dotprod_iq_grid {

// Points l, l + 1 of a sub-block with their signs: 16 signed weights.
inline int8x16_t signed_points(const IqSub32& s, int l) {
    const int8x16_t v = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s.points[l]), vcreate_u64(s.points[l + 1])));
    const int8x16_t m = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s.signs[l]), vcreate_u64(s.signs[l + 1])));
    return vsubq_s8(veorq_s8(v, m), m);
}

// The same for the types whose signs are whole bytes (kIqSignBytes): bytes
// l and l + 1 spread over the vector's halves, each byte tested against its
// own bit (the masks the table gives, without its two lookups).
inline int8x16_t signed_points(const IqSub32& s, const uint8_t* sign_bytes, int l) {
    static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const int8x16_t v = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s.points[l]), vcreate_u64(s.points[l + 1])));
    const uint8x16_t spread = vcombine_u8(vdup_n_u8(sign_bytes[l]), vdup_n_u8(sign_bytes[l + 1]));
    const int8x16_t m = vreinterpretq_s8_u8(vtstq_u8(spread, vld1q_u8(kBits)));
    return vsubq_s8(veorq_s8(v, m), m);
}

// IQ1's points l, l + 1 of a sub-block as 16 signed weights 8 p + shift:
// the table's 8 p + 1, less 2 where a point's shift is -1/8.
inline int8x16_t iq1_weights(const Iq1Sub32& s, int l) {
    const int8x16_t v = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s.points[l]), vcreate_u64(s.points[l + 1])));
    const int8x16_t two = vcombine_s8(vdup_n_s8(s.shift[l] < 0 ? 2 : 0), vdup_n_s8(s.shift[l + 1] < 0 ? 2 : 0));
    return vsubq_s8(v, two);
}

// S of one block against 256 activation codes: iq_block_sum's integer.
template <QuantType kType>
inline int32_t block_sum(const uint8_t* block, const int8_t* y, const IqTables& t) {
    int32x4_t total = vdupq_n_s32(0);
    if constexpr (kIq1<kType>) {
        for (int j = 0; j < 8; ++j) {
            const Iq1Sub32 s = iq1_decode32<kType>(block, j, t.iq1_weights);
            const int32x4_t lo = vdotq_s32(vdupq_n_s32(0), iq1_weights(s, 0), vld1q_s8(y + 32 * j));
            const int32x4_t hi = vdotq_s32(vdupq_n_s32(0), iq1_weights(s, 2), vld1q_s8(y + 32 * j + 16));
            total = vmlaq_n_s32(total, lo, s.scale[0]);
            total = vmlaq_n_s32(total, hi, s.scale[2]);
        }
    } else {
        for (int j = 0; j < 8; ++j) {
            const IqSub32 s = iq_decode32<kType, !kIqSignBytes<kType>>(block, j, t);
            int8x16_t first, second;
            if constexpr (kIqSignBytes<kType>) {
                const uint8_t* sign_bytes = iq_sign_bytes<kType>(block, j);
                first = signed_points(s, sign_bytes, 0);
                second = signed_points(s, sign_bytes, 2);
            } else {
                first = signed_points(s, 0);
                second = signed_points(s, 2);
            }
            const int32x4_t lo = vdotq_s32(vdupq_n_s32(0), first, vld1q_s8(y + 32 * j));
            const int32x4_t hi = vdotq_s32(vdupq_n_s32(0), second, vld1q_s8(y + 32 * j + 16));
            total = vmlaq_n_s32(total, lo, s.scale_lo);
            total = vmlaq_n_s32(total, hi, s.scale_hi);
        }
    }
    return vaddvq_s32(total);
}

template <QuantType kType, size_t kBlockBytes>
void vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y, size_t y_stride,
                    int64_t unit_n, size_t unit_stride, bool accumulate) {
    const IqTables t = iq_tables(kType);
    dotprod_loop::run<kType, 256, kGroupRows * kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, float32x4_t acc) {
            float s[4], d[4];
            const auto* xq = reinterpret_cast<const int8_t*>(xblock + q4k_group::kQ8KQs);
            for (int i = 0; i < 4; ++i) {
                const uint8_t* block = p + (r0 + i) * kBlockBytes;
                s[i] = static_cast<float>(block_sum<kType>(block, xq, t));
                d[i] = fp16_to_fp32(iq_block_d_of<kType>(block));
            }
            float dx;
            std::memcpy(&dx, xblock, 4);
            // The canonical step: acc = fma(dx, d * (k * S), acc).
            const float32x4_t ks = vmulq_f32(vdupq_n_f32(kIqStepFactor<kType>), vld1q_f32(s));
            return vfmaq_f32(acc, vdupq_n_f32(dx), vmulq_f32(vld1q_f32(d), ks));
        });
}

}  // namespace dotprod_iq_grid
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
