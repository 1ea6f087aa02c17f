// IQ4_XS weights in the group layout (ops/row_groups.h) against Q8_K
// activations in portable Highway ops, for every target but AVX-512 VNNI:
// Q4_K's portable kernel (kquant_groups_hwy-inl.h) with the 4-bit indices
// looked up in the grid (+ 128) by a byte table lookup per vector, signed
// sub-block scales, and the offset 128 taken off as sum_j s_j sum(y)_j.
// Integer sums are exact; the float step is the canonical one. Included by
// kquants_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_IQ4XS_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ4XS_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_IQ4XS_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_IQ4XS_GROUPS_HWY_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/canonical_math-inl.h"
#include "ops/portable_group_loop-inl.h"

#if HWY_TARGET != HWY_AVX3_DL

#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_iq4xs {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;
using DB = hn::Rebind<uint8_t, DI>;

using DB8 = hn::Rebind<uint8_t, DU>;
using DV8 = hn::Repartition<uint8_t, DU>;

// The grid values (+ 128) of the nibbles at bit kShift of each byte of v.
template <int kShift>
HWY_INLINE hn::Vec<DU> grid_values(hn::Vec<DU> v) {
    const DU du;
#if HWY_TARGET == HWY_SCALAR
    // One 32-bit lane: no byte vectors to look up in.
    const uint32_t word = hn::GetLane(v);
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) {
        out |= static_cast<uint32_t>(iq4xs_group::kIq4GridPlus128[(word >> (8 * i + kShift)) & 0xF]) << (8 * i);
    }
    return hn::Set(du, out);
#else
    const DV8 dv8;
    const auto grid = hn::LoadDup128(dv8, iq4xs_group::kIq4GridPlus128);
    const auto index = hn::And(hn::BitCast(dv8, hn::ShiftRight<kShift>(v)), hn::Set(dv8, uint8_t{0x0F}));
    return hn::BitCast(du, hn::TableLookupBytes(grid, index));
#endif
}

// Byte i of every lane, as int32.
template <int kShift>
HWY_INLINE hn::Vec<DI> byte_at(hn::Vec<DU> v) {
    const DI di;
    const DU du;
    return hn::BitCast(di, hn::And(hn::ShiftRight<kShift>(v), hn::Set(du, 0xFFu)));
}

// Rows [r0, r0 + lanes) of super-block p, one column xb (a Q8_K block):
// sum_j s_j (v . y)_j, v the grid values, exact.
HWY_INLINE hn::Vec<DI> super_block_sum(const uint8_t* p, int r0, const uint8_t* xb) {
    using namespace iq4xs_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    const DI di;
    const DU du;
    const DB8 db;
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    auto scaled = hn::Zero(di), offset = hn::Zero(di);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    for (int h = 0; h < 4; ++h) {
        auto s_lo = hn::Zero(di), s_hi = hn::Zero(di);
        for (int k = 0; k < 8; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + kQs + 512 * h + 64 * k + 4 * r0));
            // The grid values (+ 128) of the low and of the high nibbles, a byte each.
            const auto lo_v = grid_values<0>(v);
            const auto hi_v = grid_values<4>(v);
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            const int8_t* hi = lo + 32;              // sub-block 2h + 1's
            s_lo = hn::Add(s_lo, hn::Mul(byte_at<0>(lo_v), hn::Set(di, lo[0])));
            s_hi = hn::Add(s_hi, hn::Mul(byte_at<0>(hi_v), hn::Set(di, hi[0])));
            s_lo = hn::Add(s_lo, hn::Mul(byte_at<8>(lo_v), hn::Set(di, lo[1])));
            s_hi = hn::Add(s_hi, hn::Mul(byte_at<8>(hi_v), hn::Set(di, hi[1])));
            s_lo = hn::Add(s_lo, hn::Mul(byte_at<16>(lo_v), hn::Set(di, lo[2])));
            s_hi = hn::Add(s_hi, hn::Mul(byte_at<16>(hi_v), hn::Set(di, hi[2])));
            s_lo = hn::Add(s_lo, hn::Mul(byte_at<24>(lo_v), hn::Set(di, lo[3])));
            s_hi = hn::Add(s_hi, hn::Mul(byte_at<24>(hi_v), hn::Set(di, hi[3])));
        }
        const auto sc_lo = hn::Sub(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(db, p + kScales + 16 * (2 * h) + r0))),
                                   hn::Set(di, 32));
        const auto sc_hi = hn::Sub(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(db, p + kScales + 16 * (2 * h + 1) + r0))),
                                   hn::Set(di, 32));
        scaled = hn::Add(scaled, hn::Add(hn::Mul(s_lo, sc_lo), hn::Mul(s_hi, sc_hi)));
        offset = hn::Add(offset, hn::Add(hn::Mul(sc_lo, hn::Set(di, bsums[4 * h] + bsums[4 * h + 1])),
                                         hn::Mul(sc_hi, hn::Set(di, bsums[4 * h + 2] + bsums[4 * h + 3]))));
    }
    return hn::Sub(scaled, hn::ShiftLeft<7>(offset));
}

// QuantTraits::vec_dot_groups for IQ4_XS (x_sums unused: Q8_K has its bsums).
inline void iq4_xs_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<256, iq4xs_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            const auto sum = super_block_sum(p, r0, xblock);
            const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            float dx;
            std::memcpy(&dx, xblock, 4);
            return canonical::fused_mul_add(df, hn::Set(df, dx), hn::Mul(d, hn::ConvertTo(df, sum)), acc);
        });
}

}  // namespace portable_iq4xs
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not AVX-512 VNNI
#endif  // include guard
