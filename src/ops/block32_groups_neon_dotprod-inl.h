// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights in the group layout
// (ops/block32_group_layout.h) against Q8_0 activations with ARM's
// dot-product extension (sdot; ops/int8_dot_extension.h), for Highway's NEON
// target on 64-bit ARM CPUs that have it. Included by dot_hwy.cpp once per
// target (hence the toggling include guard), inside nothing.
//
// Q4_0's kernel (dot_int8_groups_neon_dotprod-inl.h) with each type's codes:
// a 128-bit vector of a chunk holds 4 rows' 4 bytes (one row per int32 lane),
// so one vdotq_s32 against the column's 4 activation bytes, broadcast, adds
// 4 products to each row's lane. The codes of vector k are formed as bytes:
// - Q4_1, Q5_0, Q5_1: the nibbles (0..15), Q5's fifth bit or-ed in as 16
//   (vtstq of bit 2k, 2k + 1 of the high-bit vector): 0..31, valid signed
//   bytes; Q5_0's offset of 16 costs -16 * sum(y) as in the portable kernel.
// - IQ4_NL, MXFP4: the signed grid values (kIq4nlValues, kMxfp4Values) by a
//   byte table lookup. sdot multiplies signed by signed, so the portable
//   kernel's grid + 128 (+ 12) and its offset times sum(y) are not needed:
//   sum (v + o) y - o sum(y) is the same integer.
// Every integer sum is exact, and the float step is the portable kernel's
// (block32_groups_hwy-inl.h), in the same fused multiply-adds: the bits equal
// every other target's.

#if defined(TESSERA_OPS_BLOCK32_GROUPS_NEON_DOTPROD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_BLOCK32_GROUPS_NEON_DOTPROD_INL_H_
#undef TESSERA_OPS_BLOCK32_GROUPS_NEON_DOTPROD_INL_H_
#else
#define TESSERA_OPS_BLOCK32_GROUPS_NEON_DOTPROD_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64

#include <arm_neon.h>

#include "ops/block32_group_layout.h"
#include "ops/group_tiles.h"
#include "ops/quant_blocks.h"
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
namespace dotprod_block32 {

inline int8x16_t broadcast4(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

template <QuantType kType>
constexpr block32_group::Layout layout_of() {
    using namespace block32_group;
    return kType == QuantType::Q5_0 ? kQ5_0 : kType == QuantType::Q5_1 ? kQ5_1 : kType == QuantType::Q4_1 ? kQ4_1 : kType == QuantType::IQ4_NL ? kIQ4_NL : kMXFP4;
}

// Rows r0..r0 + 3's scales d_w of block p.
template <QuantType kType>
inline float32x4_t row_scales(const uint8_t* p, int r0) {
    if constexpr (kType == QuantType::MXFP4) {
        float s[4];
        for (int r = 0; r < 4; ++r) s[r] = e8m0_half_to_float(p[r0 + r]);
        return vld1q_f32(s);
    } else {
        uint16_t h4[4];
        std::memcpy(h4, p + 2 * r0, 8);
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h4)));
    }
}

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <QuantType kType, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    constexpr block32_group::Layout L = layout_of<kType>();
    constexpr int32_t kOffset = kType == QuantType::Q5_0 ? 16 : 0;
    constexpr int64_t kActBlockBytes = 34;
    const uint8x16_t low = vdupq_n_u8(0x0F), bit4 = vdupq_n_u8(0x10);
    const int8x16_t grid = vld1q_s8(kType == QuantType::MXFP4 ? kMxfp4Values : kIq4nlValues);
    const Ahead near = near_prefetch(kType);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        float32x4_t acc[C][4];
        for (int c = 0; c < C; ++c) {
            for (int q = 0; q < 4; ++q) acc[c][q] = accumulate ? vld1q_f32(y + c * y_stride + 4 * q) : vdupq_n_f32(0.0f);
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * L.bytes;
            prefetch_ahead(p, L.bytes, near);
            float dx[C];
            for (int c = 0; c < C; ++c) {
                uint16_t hx;
                std::memcpy(&hx, x + c * x_stride + b * kActBlockBytes, 2);
                dx[c] = fp16_to_fp32(hx);
            }
            for (int q = 0; q < 4; ++q) {
                const float32x4_t dw = row_scales<kType>(p, 4 * q);
                // w[k]: rows 4q..4q+3, codes 4k..4k+3; w[k + 4]: codes 16 + 4k..; as signed bytes.
                int8x16_t w[8];
                uint8x16_t hv = vdupq_n_u8(0);
                if constexpr (L.highs != 0) hv = vld1q_u8(p + L.highs + 16 * q);
                for (int k = 0; k < 4; ++k) {
                    const uint8x16_t v = vld1q_u8(p + L.qs + 64 * k + 16 * q);
                    const uint8x16_t lo = vandq_u8(v, low), hi = vshrq_n_u8(v, 4);
                    if constexpr (L.highs != 0) {
                        const uint8x16_t fifth_lo = vandq_u8(vtstq_u8(hv, vdupq_n_u8(uint8_t(1u << (2 * k)))), bit4);
                        const uint8x16_t fifth_hi = vandq_u8(vtstq_u8(hv, vdupq_n_u8(uint8_t(2u << (2 * k)))), bit4);
                        w[k] = vreinterpretq_s8_u8(vorrq_u8(lo, fifth_lo));
                        w[k + 4] = vreinterpretq_s8_u8(vorrq_u8(hi, fifth_hi));
                    } else if constexpr (kType == QuantType::Q4_1) {
                        w[k] = vreinterpretq_s8_u8(lo);
                        w[k + 4] = vreinterpretq_s8_u8(hi);
                    } else {
                        w[k] = vqtbl1q_s8(grid, lo);
                        w[k + 4] = vqtbl1q_s8(grid, hi);
                    }
                }
                float32x4_t m = vdupq_n_f32(0.0f);
                if constexpr (L.m != 0) {
                    uint16_t h4[4];
                    std::memcpy(h4, p + L.m + 8 * q, 8);
                    m = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h4)));
                }
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xq = x + c * x_stride + b * kActBlockBytes + 2;
                    const int32_t ysum = sums[c * sums_stride + b];
                    int32x4_t s = vdupq_n_s32(-kOffset * ysum);
                    for (int k = 0; k < 4; ++k) {
                        s = vdotq_s32(s, w[k], broadcast4(xq + 4 * k));
                        s = vdotq_s32(s, w[k + 4], broadcast4(xq + 16 + 4 * k));
                    }
                    if constexpr (L.m != 0) {  // Q5_1, Q4_1: block = fma(m, sum(y), d_w * s); acc = fma(d_x, block, acc)
                        const float32x4_t block =
                            vfmaq_f32(vmulq_f32(dw, vcvtq_f32_s32(s)), m, vdupq_n_f32(static_cast<float>(ysum)));
                        acc[c][q] = vfmaq_f32(acc[c][q], vdupq_n_f32(dx[c]), block);
                    } else {  // acc = fma(s, d_w * d_x, acc)
                        acc[c][q] = vfmaq_f32(acc[c][q], vcvtq_f32_s32(s), vmulq_f32(dw, vdupq_n_f32(dx[c])));
                    }
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int q = 0; q < 4; ++q) vst1q_f32(y + c * y_stride + 4 * q, acc[c][q]);
        }
    }
}

// QuantTraits::vec_dot_groups for the type.
template <QuantType kType>
constexpr VecDotGroupsFn block32_vec_dot_groups =
    int8_group_entry<32, group_kernel<kType, 1>, group_kernel<kType, 2>, group_kernel<kType, 3>,
                     group_kernel<kType, 4>>;

}  // namespace dotprod_block32
}  // namespace HWY_NAMESPACE
}  // namespace tessera
TESSERA_DOTPROD_POP
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#endif  // include guard
