// NVFP4 weights in the group layout (nvfp4_group_layout.h) with ARM's
// dot-product extension (sdot; ops/int8_dot_extension.h), for Highway's NEON
// target on 64-bit ARM CPUs that have it. Included by nvfp4_hwy.cpp once per
// target (hence the toggling include guard), inside nothing. Raw NEON:
// Highway 1.0.3's ops cannot be inlined into functions compiled with the
// extension.
//
// A 128-bit vector holds 4 rows' 4 code bytes (one row per int32 lane): one
// tbl looks the low (high) nibbles up in E2M1's doubled values plus 12, and
// one vdotq_s32 against the column's 4 activation bytes replaces the portable
// kernel's shift, mask and multiply per byte (nvfp4_hwy.cpp). 12 times each
// 16 activations' sum is taken off, the sums counted per step. The two
// sub-blocks of a half keep separate integer sums, each weighed by its UE4M3
// scale, converted as the portable kernel converts it; the float step is the
// portable kernel's: the bits equal every other target's.

#if defined(TESSERA_OPS_NVFP4_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_NVFP4_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_NVFP4_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_NVFP4_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/dotprod_group_loop-inl.h"

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/block32_group_layout.h"
#include "ops/nvfp4_group_layout.h"
#include "ops/nvfp4_scalar.h"
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
namespace dotprod_nvfp4 {

// UE4M3 scale bytes of 4 rows as floats: exponent e >= 1 under a float's
// exponent, rebiased by 119; e = 0 as man * 2^-10; 0x7F as 0.
inline float32x4_t scales_of(const uint8_t* bytes) {
    const int32x4_t b = vandq_s32(dotprod_loop::widen4_u8(bytes), vdupq_n_s32(0x7F));
    const float32x4_t normal = vreinterpretq_f32_s32(vaddq_s32(vshlq_n_s32(b, 20), vdupq_n_s32(119 << 23)));
    const float32x4_t tiny = vmulq_f32(vcvtq_f32_s32(vandq_s32(b, vdupq_n_s32(7))), vdupq_n_f32(0x1p-10f));
    const float32x4_t value = vbslq_f32(vcltq_s32(b, vdupq_n_s32(8)), tiny, normal);
    return vbslq_f32(vceqq_s32(b, vdupq_n_s32(0x7F)), vdupq_n_f32(0.0f), value);
}

// QuantTraits::vec_dot_groups for NVFP4.
inline void vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr int32_t kOffset = 12;  // block32_group::kMxfp4Plus12
    dotprod_loop::run<QuantType::NVFP4, kNvfp4Block, nvfp4_group::kBytes, 2 * static_cast<int64_t>(sizeof(BlockQ8_0))>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [](const uint8_t* p, int r0, const uint8_t* xb, float32x4_t acc) {
            const uint8x16_t nib = vdupq_n_u8(0x0F);
            const uint8x16_t grid = vld1q_u8(block32_group::kMxfp4Plus12);
            for (int h = 0; h < 2; ++h) {
                const uint8_t* xh = xb + h * static_cast<int64_t>(sizeof(BlockQ8_0));
                const auto* xq = reinterpret_cast<const int8_t*>(xh + 2);
                const uint8_t* q = p + nvfp4_group::kQs + 256 * h;
                // Sub-block 2h: the low nibbles against xq[0, 16); 2h + 1: the high against xq[16, 32).
                int32x4_t lo = vdupq_n_s32(-kOffset * vaddlvq_s8(vld1q_s8(xq)));
                int32x4_t hi = vdupq_n_s32(-kOffset * vaddlvq_s8(vld1q_s8(xq + 16)));
                for (int k = 0; k < 4; ++k) {
                    const uint8x16_t v = vld1q_u8(q + 64 * k + 4 * r0);
                    lo = vdotq_s32(lo, vreinterpretq_s8_u8(vqtbl1q_u8(grid, vandq_u8(v, nib))),
                                   dotprod_loop::broadcast4(xq + 4 * k));
                    hi = vdotq_s32(hi, vreinterpretq_s8_u8(vqtbl1q_u8(grid, vshrq_n_u8(v, 4))),
                                   dotprod_loop::broadcast4(xq + 16 + 4 * k));
                }
                uint16_t dx;
                std::memcpy(&dx, xh, 2);
                float32x4_t t = vmulq_f32(scales_of(p + 32 * h + r0), vcvtq_f32_s32(lo));
                t = vfmaq_f32(t, scales_of(p + 32 * h + 16 + r0), vcvtq_f32_s32(hi));
                acc = vfmaq_f32(acc, vdupq_n_f32(fp16_to_fp32(dx)), t);
            }
            return acc;
        });
}

}  // namespace dotprod_nvfp4
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
