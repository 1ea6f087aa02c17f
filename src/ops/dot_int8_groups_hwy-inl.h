// Q4_0 and Q8_0 in the group layout (ops/row_groups.h) in portable Highway
// ops, for every target without an x86 grouped kernel (NEON, SVE, SSSE3/SSE4,
// EMU128). Included by dot_hwy.cpp once per target (hence the toggling
// include guard), inside nothing.
//
// A vector of int32 lanes holds consecutive rows of a group (4 on 128-bit
// targets, at most 16), so a chunk's 4 bytes per row are one lane: byte i of
// every row is a shift and a mask away, multiplied by the column's byte i
// broadcast. Integer sums are exact; the float step is the canonical one
// (vec_dot_groups_canonical): one fused multiply-add per block, in block
// order. A target without a fused multiply-add (SSE4, EMU128, 32-bit NEON)
// takes std::fma per lane: slower, but the same bits as every other node.

#if defined(TESSERA_OPS_DOT_INT8_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_DOT_INT8_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_GROUPS_HWY_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: a toggling header must be seen on every pass.
#include "ops/canonical_math-inl.h"

#if HWY_TARGET != HWY_AVX2 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL

#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_groups {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;

// Byte `i` of every lane of v, as int32 (0..255).
template <int kShift>
HWY_INLINE hn::Vec<DI> byte_at(hn::Vec<DU> v, int mask) {
    const DI di;
    const DU du;
    return hn::BitCast(di, hn::And(hn::ShiftRight<kShift>(v), hn::Set(du, static_cast<uint32_t>(mask))));
}

// Rows [r0, r0 + lanes) of one group, one column, block b: the exact sum.
template <bool kQ4>
HWY_INLINE hn::Vec<DI> block_sum(const uint8_t* p, int r0, const int8_t* xq, int32_t x_sum) {
    const DI di;
    const DU du;
    constexpr int64_t kScaleBytes = 32;
    if constexpr (kQ4) {
        // Unsigned nibbles, then -8 * sum(y) for the offset.
        auto s = hn::Set(di, -8 * x_sum);
        for (int k = 0; k < 4; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + kScaleBytes + 64 * k + 4 * r0));
            const int8_t* lo = xq + 4 * k;
            const int8_t* hi = xq + 16 + 4 * k;
            s = hn::Add(s, hn::Mul(byte_at<0>(v, 0x0F), hn::Set(di, lo[0])));
            s = hn::Add(s, hn::Mul(byte_at<4>(v, 0x0F), hn::Set(di, hi[0])));
            s = hn::Add(s, hn::Mul(byte_at<8>(v, 0x0F), hn::Set(di, lo[1])));
            s = hn::Add(s, hn::Mul(byte_at<12>(v, 0x0F), hn::Set(di, hi[1])));
            s = hn::Add(s, hn::Mul(byte_at<16>(v, 0x0F), hn::Set(di, lo[2])));
            s = hn::Add(s, hn::Mul(byte_at<20>(v, 0x0F), hn::Set(di, hi[2])));
            s = hn::Add(s, hn::Mul(byte_at<24>(v, 0x0F), hn::Set(di, lo[3])));
            s = hn::Add(s, hn::Mul(byte_at<28>(v, 0x0F), hn::Set(di, hi[3])));
        }
        return s;
    } else {
        // Codes stored + 128, then -128 * sum(y) for the offset.
        auto s = hn::Set(di, -128 * x_sum);
        for (int k = 0; k < 8; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + kScaleBytes + 64 * k + 4 * r0));
            const int8_t* y4 = xq + 4 * k;
            s = hn::Add(s, hn::Mul(byte_at<0>(v, 0xFF), hn::Set(di, y4[0])));
            s = hn::Add(s, hn::Mul(byte_at<8>(v, 0xFF), hn::Set(di, y4[1])));
            s = hn::Add(s, hn::Mul(byte_at<16>(v, 0xFF), hn::Set(di, y4[2])));
            s = hn::Add(s, hn::Mul(byte_at<24>(v, 0xFF), hn::Set(di, y4[3])));
        }
        return s;
    }
}

// QuantTraits::vec_dot_groups for Q4_0 (kQ4) and Q8_0.
template <bool kQ4>
void int8_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                         size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                         size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr int64_t kGroupBlockBytes = kQ4 ? 288 : 544, kActBlockBytes = 34;
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const int lanes = static_cast<int>(hn::Lanes(df));
    const int64_t nb = n / 32;
    const int64_t unit_nb = (unit_n > 0 && unit_n < n ? unit_n : n) / 32;
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int g = 0; g < n_groups; ++g) {
        const uint8_t* group = wb + g * group_stride;
        for (int c = 0; c < n_cols; ++c) {
            const uint8_t* xc = xb + c * x_stride;
            const int32_t* sums = x_sums + c * sums_stride;
            for (int r0 = 0; r0 < kGroupRows; r0 += lanes) {
                float* yr = y + c * y_stride + g * kGroupRows + r0;
                for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
                    float* out = yr + u * unit_stride;
                    auto acc = accumulate ? hn::LoadU(df, out) : hn::Zero(df);
                    const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
                    for (int64_t b = u0; b < u1; ++b) {
                        const uint8_t* p = group + b * kGroupBlockBytes;
                        const uint8_t* xblock = xc + b * kActBlockBytes;
                        const auto s = block_sum<kQ4>(p, r0, reinterpret_cast<const int8_t*>(xblock + 2), sums[b]);
                        uint16_t hx;
                        std::memcpy(&hx, xblock, 2);
                        const auto dw =
                            hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
                        const auto scale = hn::Mul(dw, hn::Set(df, fp16_to_fp32(hx)));
                        acc = canonical::fused_mul_add(df, hn::ConvertTo(df, s), scale, acc);
                    }
                    hn::StoreU(acc, df, out);
                }
            }
        }
    }
}

}  // namespace portable_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not an x86 grouped target
#endif  // include guard
