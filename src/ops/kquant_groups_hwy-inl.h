// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations in portable Highway ops, for every target without an x86
// grouped kernel (NEON, SSE4, the fallback). Included by kquants_hwy.cpp once
// per target (hence the toggling include guard), inside nothing.
//
// A vector of int32 lanes holds consecutive rows of a group (4 on 128-bit
// targets, at most 16), so a chunk's 4 bytes per row are one lane: the low
// and high nibbles of byte i of every row are a shift and a mask away,
// multiplied by the column's activation bytes i of sub-blocks 2h and 2h + 1,
// broadcast. The 6-bit scales and mins are stored unpacked, one byte per row,
// so a sub-block's scales of `lanes` rows are one widening load. Integer sums
// are exact; the float step is the canonical one (vec_dot_groups_canonical),
// in fused multiply-adds on every target.

#if defined(TESSERA_OPS_KQUANT_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_HWY_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/canonical_math-inl.h"
#include "ops/portable_group_loop-inl.h"

#if HWY_TARGET != HWY_AVX2 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL

#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_kgroups {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;
using DB = hn::Rebind<uint8_t, DI>;

// The low (kShift = 8i) or high (8i + 4) nibble of byte i of every lane, as int32.
template <int kShift>
HWY_INLINE hn::Vec<DI> nibble_at(hn::Vec<DU> v) {
    const DI di;
    const DU du;
    return hn::BitCast(di, hn::And(hn::ShiftRight<kShift>(v), hn::Set(du, 0x0Fu)));
}

// Rows [r0, r0 + lanes) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j (q . y)_j into scaled, and sum_j m_j sum(y)_j into mins.
HWY_INLINE void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, hn::Vec<DI>& scaled,
                                 hn::Vec<DI>& mins) {
    using namespace q4k_group;
    const DI di;
    const DU du;
    const DB db;
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    scaled = hn::Zero(di);
    mins = hn::Zero(di);
    for (int j = 0; j < 8; ++j) {
        const auto m = hn::PromoteTo(di, hn::LoadU(db, p + kMins + 16 * j + r0));
        mins = hn::Add(mins, hn::Mul(m, hn::Set(di, bsums[2 * j] + bsums[2 * j + 1])));
    }
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    for (int h = 0; h < 4; ++h) {
        auto s_lo = hn::Zero(di), s_hi = hn::Zero(di);
        for (int k = 0; k < 8; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + kQs + 512 * h + 64 * k + 4 * r0));
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            const int8_t* hi = lo + 32;              // sub-block 2h + 1's
            s_lo = hn::Add(s_lo, hn::Mul(nibble_at<0>(v), hn::Set(di, lo[0])));
            s_hi = hn::Add(s_hi, hn::Mul(nibble_at<4>(v), hn::Set(di, hi[0])));
            s_lo = hn::Add(s_lo, hn::Mul(nibble_at<8>(v), hn::Set(di, lo[1])));
            s_hi = hn::Add(s_hi, hn::Mul(nibble_at<12>(v), hn::Set(di, hi[1])));
            s_lo = hn::Add(s_lo, hn::Mul(nibble_at<16>(v), hn::Set(di, lo[2])));
            s_hi = hn::Add(s_hi, hn::Mul(nibble_at<20>(v), hn::Set(di, hi[2])));
            s_lo = hn::Add(s_lo, hn::Mul(nibble_at<24>(v), hn::Set(di, lo[3])));
            s_hi = hn::Add(s_hi, hn::Mul(nibble_at<28>(v), hn::Set(di, hi[3])));
        }
        const auto sc_lo = hn::PromoteTo(di, hn::LoadU(db, p + kScales + 16 * (2 * h) + r0));
        const auto sc_hi = hn::PromoteTo(di, hn::LoadU(db, p + kScales + 16 * (2 * h + 1) + r0));
        scaled = hn::Add(scaled, hn::Add(hn::Mul(s_lo, sc_lo), hn::Mul(s_hi, sc_hi)));
    }
}

// QuantTraits::vec_dot_groups for Q4_K (x_sums unused: Q8_K has its bsums).
inline void q4_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<256, q4k_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            hn::Vec<DI> scaled, mins;
            super_block_sums(p, r0, xblock, scaled, mins);
            const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            const auto dmin = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p + q4k_group::kDmin) + r0));
            float dx;
            std::memcpy(&dx, xblock, 4);
            const auto block = canonical::fused_mul_add(df, hn::Neg(dmin), hn::ConvertTo(df, mins),
                                                        hn::Mul(d, hn::ConvertTo(df, scaled)));
            return canonical::fused_mul_add(df, hn::Set(df, dx), block, acc);
        });
}

}  // namespace portable_kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not an x86 grouped target
#endif  // include guard
