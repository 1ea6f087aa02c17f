// The loop the K-quant grouped kernels with ARM's dot product share
// (*_groups_neon_dotprod-inl.h; ops/int8_dot_extension.h): each group of 16
// rows, each column, each unit of blocks from 0 (or from what y holds, with
// accumulate), the blocks in order, each block's rows 4 at a time (one
// 128-bit vector of float sums). A kernel supplies only its block step:
//   acc = step(block p, first row r0, activation block xb, acc)
// the portable loop's (portable_group_loop-inl.h) at 4 rows a vector, with
// a group's block read once per column rather than once per 4 rows.
// For Highway's NEON target on 64-bit ARM; included by the kernels' headers
// once per target (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_DOTPROD_GROUP_LOOP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOTPROD_GROUP_LOOP_INL_H_
#undef TESSERA_OPS_DOTPROD_GROUP_LOOP_INL_H_
#else
#define TESSERA_OPS_DOTPROD_GROUP_LOOP_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/group_prefetch.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
// Compiled with the dot product, so that the steps (which use it) inline.
TESSERA_DOTPROD_PUSH
namespace tessera {
namespace HWY_NAMESPACE {
namespace dotprod_loop {

// kBlock elements, kBlockBytes group bytes and kActBytes activation bytes a block.
template <QuantType kType, int64_t kBlock, int64_t kBlockBytes, int64_t kActBytes, class Step>
HWY_INLINE void run(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    int n_cols, float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate,
                    const Step& step) {
    const int64_t nb = n / kBlock;
    const int64_t unit_nb = (unit_n > 0 && unit_n < n ? unit_n : n) / kBlock;
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const Ahead near = near_prefetch(kType);
    for (int g = 0; g < n_groups; ++g) {
        const uint8_t* group = wb + g * group_stride;
        for (int c = 0; c < n_cols; ++c) {
            const uint8_t* xc = xb + c * x_stride;
            float* yc = y + c * y_stride + g * kGroupRows;
            for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
                float* out = yc + u * unit_stride;
                float32x4_t acc[4];
                for (int q = 0; q < 4; ++q) acc[q] = accumulate ? vld1q_f32(out + 4 * q) : vdupq_n_f32(0.0f);
                const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
                for (int64_t b = u0; b < u1; ++b) {
                    const uint8_t* p = group + b * kBlockBytes;
                    prefetch_ahead(p, kBlockBytes, near);
                    for (int q = 0; q < 4; ++q) acc[q] = step(p, 4 * q, xc + b * kActBytes, acc[q]);
                }
                for (int q = 0; q < 4; ++q) vst1q_f32(out + 4 * q, acc[q]);
            }
        }
    }
}

// 4 bytes at p, broadcast to every int32 lane: a column's activations for one sdot.
inline int8x16_t broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// 4 bytes at p (a sub-block's scales or mins of 4 rows) as int32, unsigned or signed.
inline int32x4_t widen4_u8(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v))))));
}
inline int32x4_t widen4_s8(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(v)))));
}

// 4 rows' fp16 values at p as floats.
inline float32x4_t fp16x4(const uint8_t* p) {
    uint16_t h4[4];
    std::memcpy(h4, p, 8);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h4)));
}

}  // namespace dotprod_loop
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
