// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights in the group layout
// (ops/block32_group_layout.h) against Q8_0 activations in portable Highway
// ops, for every target but AVX-512 VNNI: a vector of int32 lanes holds
// consecutive rows, so vector k's 4 bytes of a row are one lane; code i is a
// shift and a mask away (its fifth bit from the high-bit lane, or its grid
// value from a byte table lookup), multiplied by the column's activation
// byte, broadcast. Integer sums are exact; the float step is the canonical
// one (block32_groups_vnni-inl.h), fused on every target. Included by
// dot_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_BLOCK32_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_BLOCK32_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_BLOCK32_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_BLOCK32_GROUPS_HWY_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/canonical_math-inl.h"
#include "ops/portable_group_loop-inl.h"

#if HWY_TARGET != HWY_AVX3_DL

#include "ops/block32_group_layout.h"
#include "ops/quant_blocks.h"
#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_block32 {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;

// Each byte's nibble at bit kShift of v replaced by table[nibble].
template <int kShift>
HWY_INLINE hn::Vec<DU> lookup(hn::Vec<DU> v, const uint8_t* table) {
    const DU du;
#if HWY_TARGET == HWY_SCALAR
    // One 32-bit lane: no byte vectors to look up in.
    const uint32_t word = hn::GetLane(v);
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) out |= static_cast<uint32_t>(table[(word >> (8 * i + kShift)) & 0xF]) << (8 * i);
    return hn::Set(du, out);
#else
    const hn::Repartition<uint8_t, DU> d8;
    const auto index = hn::And(hn::BitCast(d8, hn::ShiftRight<kShift>(v)), hn::Set(d8, uint8_t{0x0F}));
    return hn::BitCast(du, hn::TableLookupBytes(hn::LoadDup128(d8, table), index));
#endif
}

template <QuantType kType>
constexpr block32_group::Layout layout_of() {
    using namespace block32_group;
    return kType == QuantType::Q5_0 ? kQ5_0 : kType == QuantType::Q5_1 ? kQ5_1 : kType == QuantType::Q4_1 ? kQ4_1 : kType == QuantType::IQ4_NL ? kIQ4_NL : kMXFP4;
}

// Rows [r0, r0 + lanes) of block p against one Q8_0 block's codes: the
// integer sum of codes x activations (the codes as stored: unsigned).
template <QuantType kType>
HWY_INLINE hn::Vec<DI> block_sum(const uint8_t* p, int r0, const int8_t* xq) {
    constexpr block32_group::Layout L = layout_of<kType>();
    const DI di;
    const DU du;
    const uint8_t* table = kType == QuantType::MXFP4 ? block32_group::kMxfp4Plus12 : block32_group::kIq4nlPlus128;
    hn::Vec<DU> hv = hn::Zero(du);
    if constexpr (L.highs != 0) hv = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + L.highs + 4 * r0));
    auto s = hn::Zero(di);
    for (int k = 0; k < 4; ++k) {
        const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + L.qs + 64 * k + 4 * r0));
        hn::Vec<DU> lo, hi;  // byte i: the code of element 4k + i, of 16 + 4k + i
        if constexpr (L.highs != 0) {
            const auto nib = hn::Set(du, 0x0F0F0F0Fu), bit = hn::Set(du, 0x01010101u);
            lo = hn::Or(hn::And(v, nib), hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(hv, 2 * k), bit)));
            hi = hn::Or(hn::And(hn::ShiftRight<4>(v), nib), hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(hv, 2 * k + 1), bit)));
        } else if constexpr (kType == QuantType::Q4_1) {
            const auto nib = hn::Set(du, 0x0F0F0F0Fu);
            lo = hn::And(v, nib);
            hi = hn::And(hn::ShiftRight<4>(v), nib);
        } else {
            lo = lookup<0>(v, table);
            hi = lookup<4>(v, table);
        }
        for (int i = 0; i < 4; ++i) {
            const auto lo_i = hn::BitCast(di, hn::And(hn::ShiftRightSame(lo, 8 * i), hn::Set(du, 0xFFu)));
            const auto hi_i = hn::BitCast(di, hn::And(hn::ShiftRightSame(hi, 8 * i), hn::Set(du, 0xFFu)));
            s = hn::Add(s, hn::Mul(lo_i, hn::Set(di, xq[4 * k + i])));
            s = hn::Add(s, hn::Mul(hi_i, hn::Set(di, xq[16 + 4 * k + i])));
        }
    }
    return s;
}

// QuantTraits::vec_dot_groups for the type.
template <QuantType kType>
void block32_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                            size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                            size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr block32_group::Layout L = layout_of<kType>();
    constexpr int32_t kOffset = kType == QuantType::Q5_0 ? 16 : kType == QuantType::IQ4_NL ? 128
                              : kType == QuantType::MXFP4 ? 12 : 0;
    const DF df;
    const DI di;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const int lanes = static_cast<int>(hn::Lanes(df));
    portable_loop::run<32, L.bytes, 34>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int c, int64_t b, hn::Vec<DF> acc) {
            const int32_t ysum = x_sums[c * sums_stride + b];
            const auto* xq = reinterpret_cast<const int8_t*>(xblock + 2);
            const auto s = hn::Sub(block_sum<kType>(p, r0, xq), hn::Set(di, kOffset * ysum));
            uint16_t h;
            std::memcpy(&h, xblock, 2);
            const float dx = fp16_to_fp32(h);
            hn::Vec<DF> dw;
            if constexpr (kType == QuantType::MXFP4) {
                HWY_ALIGN float scales[kGroupRows];
                for (int r = 0; r < lanes; ++r) scales[r] = e8m0_half_to_float(p[r0 + r]);
                dw = hn::Load(df, scales);
            } else {
                dw = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            }
            if constexpr (L.m != 0) {  // Q5_1, Q4_1: the min times the activations' sum
                const auto m = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p + L.m) + r0));
                const auto block = canonical::fused_mul_add(df, m, hn::Set(df, static_cast<float>(ysum)),
                                                            hn::Mul(dw, hn::ConvertTo(df, s)));
                return canonical::fused_mul_add(df, hn::Set(df, dx), block, acc);
            } else {
                return canonical::fused_mul_add(df, hn::ConvertTo(df, s), hn::Mul(dw, hn::Set(df, dx)), acc);
            }
        });
}

}  // namespace portable_block32
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not AVX-512 VNNI
#endif  // include guard
