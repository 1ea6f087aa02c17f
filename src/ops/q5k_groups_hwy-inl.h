// Q5_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations in portable Highway ops, for every target but AVX-512 VNNI:
// Q4_K's portable kernel (kquant_groups_hwy-inl.h) with each code's fifth
// bit from the chunk's high-bit vectors. Integer sums are exact; the float
// step is the canonical one. Included by kquants_hwy.cpp once per target
// (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_Q5K_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q5K_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_Q5K_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_Q5K_GROUPS_HWY_INL_H_
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
namespace portable_q5k {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;
using DB = hn::Rebind<uint8_t, DI>;

// Code i (0..3) of each lane of vector k: its low 4 bits at bit kLow of v,
// its fifth at bit kTop of hv.
template <int kLow, int kTop>
HWY_INLINE hn::Vec<DI> code_at(hn::Vec<DU> v, hn::Vec<DU> hv) {
    const DI di;
    const DU du;
    const auto low = hn::And(hn::ShiftRight<kLow>(v), hn::Set(du, 0x0Fu));
    const auto top = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<kTop>(hv), hn::Set(du, 1u)));
    return hn::BitCast(di, hn::Or(low, top));
}

// Vector k (k % 4 = kT) against its activations: its 4 low-nibble codes into
// s_lo, its 4 high-nibble codes into s_hi.
template <int kT>
HWY_INLINE void vector_sums(hn::Vec<DU> v, hn::Vec<DU> hv, const int8_t* lo, const int8_t* hi, hn::Vec<DI>& s_lo,
                            hn::Vec<DI>& s_hi) {
    const DI di;
    constexpr int t = 2 * kT;
    s_lo = hn::Add(s_lo, hn::Mul(code_at<0, t>(v, hv), hn::Set(di, lo[0])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<4, t + 1>(v, hv), hn::Set(di, hi[0])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<8, 8 + t>(v, hv), hn::Set(di, lo[1])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<12, 8 + t + 1>(v, hv), hn::Set(di, hi[1])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<16, 16 + t>(v, hv), hn::Set(di, lo[2])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<20, 16 + t + 1>(v, hv), hn::Set(di, hi[2])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<24, 24 + t>(v, hv), hn::Set(di, lo[3])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<28, 24 + t + 1>(v, hv), hn::Set(di, hi[3])));
}

// Rows [r0, r0 + lanes) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j (q . y)_j into scaled, and sum_j m_j sum(y)_j into mins.
HWY_INLINE void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, hn::Vec<DI>& scaled,
                                 hn::Vec<DI>& mins) {
    using namespace q5k_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
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
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        for (int k = 0; k < 8; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + 64 * k + 4 * r0));
            const auto hv = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + kHighs + 64 * (k / 4) + 4 * r0));
            const int8_t* lo = xq + 64 * h + 4 * k;  // sub-block 2h's activations
            const int8_t* hi = lo + 32;              // sub-block 2h + 1's
            switch (k % 4) {
                case 0: vector_sums<0>(v, hv, lo, hi, s_lo, s_hi); break;
                case 1: vector_sums<1>(v, hv, lo, hi, s_lo, s_hi); break;
                case 2: vector_sums<2>(v, hv, lo, hi, s_lo, s_hi); break;
                default: vector_sums<3>(v, hv, lo, hi, s_lo, s_hi); break;
            }
        }
        const auto sc_lo = hn::PromoteTo(di, hn::LoadU(db, p + kScales + 16 * (2 * h) + r0));
        const auto sc_hi = hn::PromoteTo(di, hn::LoadU(db, p + kScales + 16 * (2 * h + 1) + r0));
        scaled = hn::Add(scaled, hn::Add(hn::Mul(s_lo, sc_lo), hn::Mul(s_hi, sc_hi)));
    }
}

// QuantTraits::vec_dot_groups for Q5_K (x_sums unused: Q8_K has its bsums).
inline void q5_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<256, q5k_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            hn::Vec<DI> scaled, mins;
            super_block_sums(p, r0, xblock, scaled, mins);
            const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            const auto dmin = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p + q5k_group::kDmin) + r0));
            float dx;
            std::memcpy(&dx, xblock, 4);
            const auto block = canonical::fused_mul_add(df, hn::Neg(dmin), hn::ConvertTo(df, mins),
                                                        hn::Mul(d, hn::ConvertTo(df, scaled)));
            return canonical::fused_mul_add(df, hn::Set(df, dx), block, acc);
        });
}

}  // namespace portable_q5k
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not AVX-512 VNNI
#endif  // include guard
