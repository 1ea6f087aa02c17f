// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with ARM's dot-product extension (sdot;
// ops/int8_dot_extension.h), for Highway's NEON target on 64-bit ARM CPUs
// that have it. Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// A 128-bit vector of a chunk's bytes holds 4 rows' 4 bytes (one row per
// int32 lane, as in dot_int8_groups_neon_dotprod-inl.h): their low nibbles
// are codes 4k..4k+3 of sub-block 2h, their high nibbles the same codes of
// sub-block 2h + 1, both 0..15 and so valid signed bytes for vdotq_s32
// against the column's Q8_K bytes, broadcast. That replaces the portable
// kernel's shift, mask and multiply per code with one sdot per 4 codes. The
// integer sums are exact and the float step is the canonical one
// (vec_dot_groups_canonical, in fused multiply-adds): the bits equal every
// other target's.

#if defined(TESSERA_OPS_KQUANT_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

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
namespace dotprod_kgroups {

inline int8x16_t broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// 4 unpacked bytes (a sub-block's scales or mins of rows r0..r0+3) as int32.
inline int32x4_t widen4(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    const uint16x8_t wide = vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v)));
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(wide)));
}

// Rows [r0, r0 + 4) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j (q . y)_j into scaled, and sum_j m_j sum(y)_j into mins.
inline void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, int32x4_t& scaled, int32x4_t& mins) {
    using namespace q4k_group;
    const uint8x16_t low = vdupq_n_u8(0x0F);
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    mins = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
        mins = vmlaq_n_s32(mins, widen4(p + kMins + 16 * j + r0), bsums[2 * j] + bsums[2 * j + 1]);
    }
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    scaled = vdupq_n_s32(0);
    for (int h = 0; h < 4; ++h) {
        int32x4_t s_lo = vdupq_n_s32(0), s_hi = vdupq_n_s32(0);
        for (int k = 0; k < 8; ++k) {
            const uint8x16_t v = vld1q_u8(p + kQs + 512 * h + 64 * k + 4 * r0);
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            s_lo = vdotq_s32(s_lo, vreinterpretq_s8_u8(vandq_u8(v, low)), broadcast4(lo));
            s_hi = vdotq_s32(s_hi, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), broadcast4(lo + 32));
        }
        scaled = vmlaq_s32(scaled, s_lo, widen4(p + kScales + 16 * (2 * h) + r0));
        scaled = vmlaq_s32(scaled, s_hi, widen4(p + kScales + 16 * (2 * h + 1) + r0));
    }
}

// QuantTraits::vec_dot_groups for Q4_K (x_sums unused: Q8_K has its bsums).
inline void q4_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    using namespace q4k_group;
    const int64_t nb = n / 256;
    const int64_t unit_nb = (unit_n > 0 && unit_n < n ? unit_n : n) / 256;
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int g = 0; g < n_groups; ++g) {
        const uint8_t* group = wb + g * group_stride;
        for (int c = 0; c < n_cols; ++c) {
            const uint8_t* xc = xb + c * x_stride;
            for (int r0 = 0; r0 < kGroupRows; r0 += 4) {
                float* yr = y + c * y_stride + g * kGroupRows + r0;
                for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
                    float* out = yr + u * unit_stride;
                    float32x4_t acc = accumulate ? vld1q_f32(out) : vdupq_n_f32(0.0f);
                    const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
                    for (int64_t b = u0; b < u1; ++b) {
                        const uint8_t* p = group + b * kBlockBytes;
                        const uint8_t* xblock = xc + b * kQ8KBytes;
                        int32x4_t scaled, mins;
                        super_block_sums(p, r0, xblock, scaled, mins);
                        uint16_t hd[4], hm[4];
                        std::memcpy(hd, p + 2 * r0, 8);
                        std::memcpy(hm, p + kDmin + 2 * r0, 8);
                        const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(hd)));
                        const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(hm)));
                        float dx;
                        std::memcpy(&dx, xblock, 4);
                        // The canonical step: block = fma(-dmin, mins, d * scaled); acc = fma(dx, block, acc).
                        const float32x4_t block =
                            vfmaq_f32(vmulq_f32(d, vcvtq_f32_s32(scaled)), vnegq_f32(dmin), vcvtq_f32_s32(mins));
                        acc = vfmaq_f32(acc, vdupq_n_f32(dx), block);
                    }
                    vst1q_f32(out, acc);
                }
            }
        }
    }
}

}  // namespace dotprod_kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
