// Q6_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations in portable Highway ops: every target but AVX-512 VNNI
// (AVX2, AVX-512, SSE4, NEON, the fallback). Included by kquants_hwy.cpp once
// per target (hence the toggling include guard), inside nothing.
//
// A vector of int32 lanes holds consecutive rows of a group, so vector k's 4
// bytes of a row are one lane: code i's low 4 bits are a shift and a mask
// away, its top 2 bits a shift and a mask of the high-bit vector's lane,
// multiplied by the column's activation byte, broadcast. Integer sums are
// exact; the float step is the canonical one, fused on every target.

#if defined(TESSERA_OPS_Q6K_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_Q6K_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_Q6K_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_Q6K_GROUPS_HWY_INL_H_
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
namespace portable_q6k {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;
using D8 = hn::Rebind<int8_t, DI>;

// Code i (0..3) of each lane: low nibble at bit 8i + kNibble of v, top bits
// at bit 8i + kTop of hv.
template <int kLow, int kTop>
HWY_INLINE hn::Vec<DI> code_at(hn::Vec<DU> v, hn::Vec<DU> hv) {
    const DI di;
    const DU du;
    const auto low = hn::And(hn::ShiftRight<kLow>(v), hn::Set(du, 0x0Fu));
    const auto top = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<kTop>(hv), hn::Set(du, 3u)));
    return hn::BitCast(di, hn::Or(low, top));
}

// Vector k of a chunk (k % 2 = kOdd) against its activations: 4 codes of the
// low nibbles into s_lo, 4 of the high into s_hi.
template <int kOdd>
HWY_INLINE void vector_sums(hn::Vec<DU> v, hn::Vec<DU> hv, const int8_t* lo, const int8_t* hi, hn::Vec<DI>& s_lo,
                            hn::Vec<DI>& s_hi) {
    const DI di;
    constexpr int t = 4 * kOdd;
    s_lo = hn::Add(s_lo, hn::Mul(code_at<0, t>(v, hv), hn::Set(di, lo[0])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<4, t + 2>(v, hv), hn::Set(di, hi[0])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<8, 8 + t>(v, hv), hn::Set(di, lo[1])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<12, 8 + t + 2>(v, hv), hn::Set(di, hi[1])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<16, 16 + t>(v, hv), hn::Set(di, lo[2])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<20, 16 + t + 2>(v, hv), hn::Set(di, hi[2])));
    s_lo = hn::Add(s_lo, hn::Mul(code_at<24, 24 + t>(v, hv), hn::Set(di, lo[3])));
    s_hi = hn::Add(s_hi, hn::Mul(code_at<28, 24 + t + 2>(v, hv), hn::Set(di, hi[3])));
}

// Rows [r0, r0 + lanes) of super-block p, one column xb (a Q8_K block):
// sum_j sc_j ((q - 32) . y)_j, exact.
HWY_INLINE hn::Vec<DI> super_block_sum(const uint8_t* p, int r0, const uint8_t* xb) {
    using namespace q6k_group;
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    const DI di;
    const DU du;
    const D8 d8;
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    auto total = hn::Zero(di);
    auto offset = hn::Zero(di);
    for (int j = 0; j < 16; ++j) {
        const auto sc = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p + kScales + 16 * j + r0)));
        offset = hn::Add(offset, hn::Mul(sc, hn::Set(di, bsums[j])));
    }
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    for (int h = 0; h < 4; ++h) {
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        hn::Vec<DI> s[4] = {hn::Zero(di), hn::Zero(di), hn::Zero(di), hn::Zero(di)};
        for (int k = 0; k < 8; ++k) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + 64 * k + 4 * r0));
            const auto hv = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + kHighs + 64 * (k / 2) + 4 * r0));
            const int8_t* lo = xq + 64 * h + 4 * k;
            if (k % 2 == 0) {
                vector_sums<0>(v, hv, lo, lo + 32, s[k / 4], s[2 + k / 4]);
            } else {
                vector_sums<1>(v, hv, lo, lo + 32, s[k / 4], s[2 + k / 4]);
            }
        }
        for (int j = 0; j < 4; ++j) {
            const auto sc =
                hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p + kScales + 16 * (4 * h + j) + r0)));
            total = hn::Add(total, hn::Mul(s[j], sc));
        }
    }
    return hn::Sub(total, hn::ShiftLeft<5>(offset));
}

// QuantTraits::vec_dot_groups for Q6_K (x_sums unused: Q8_K has its bsums).
inline void q6_k_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols,
                                float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<256, q6k_group::kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            const auto sum = super_block_sum(p, r0, xblock);
            const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            float dx;
            std::memcpy(&dx, xblock, 4);
            return canonical::fused_mul_add(df, hn::Set(df, dx), hn::Mul(d, hn::ConvertTo(df, sum)), acc);
        });
}

}  // namespace portable_q6k
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not AVX-512 VNNI
#endif  // include guard
