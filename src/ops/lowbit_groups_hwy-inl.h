// Q2_K and Q3_K weights in the group layout (ops/kquant_group_layout.h)
// against Q8_K activations in portable Highway ops, for every target but
// AVX-512 VNNI: a vector of int32 lanes holds consecutive rows, so a chunk
// vector's 4 bytes of a row are one lane and each 2-bit code (and Q3_K's
// third bit) a shift and a mask away, multiplied by the column's activation
// byte, broadcast. Integer sums are exact; the float step is the canonical
// one (lowbit_groups_vnni-inl.h). Included by kquants_hwy.cpp once per
// target (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_LOWBIT_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_LOWBIT_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_LOWBIT_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_LOWBIT_GROUPS_HWY_INL_H_
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
namespace portable_lowbit {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;
using DB = hn::Rebind<uint8_t, DU>;

// Rows [r0, r0 + lanes) of super-block p, one column xb (a Q8_K block): the
// scaled sum sum_j sc_j (u . y)_j and the constant part's sum_j c_j sum(y)_j
// (Q2_K: c the mins; Q3_K: c the scales s - 32), exact.
template <bool kQ3>
HWY_INLINE void super_block_sums(const uint8_t* p, int r0, const uint8_t* xb, hn::Vec<DI>& scaled,
                                 hn::Vec<DI>& constant) {
    using q4k_group::kQ8KBsums;
    using q4k_group::kQ8KQs;
    constexpr int64_t kScales = kQ3 ? q3k_group::kScales : q2k_group::kScales;
    constexpr int64_t kQs = kQ3 ? q3k_group::kQs : q2k_group::kQs;
    constexpr int64_t kChunkBytes = kQ3 ? q3k_group::kChunkBytes : q2k_group::kChunkBytes;
    const DI di;
    const DU du;
    const DB db;
    int16_t bsums[16];
    std::memcpy(bsums, xb + kQ8KBsums, sizeof bsums);
    const auto* xq = reinterpret_cast<const int8_t*>(xb + kQ8KQs);
    scaled = hn::Zero(di);
    constant = hn::Zero(di);
    hn::Vec<DI> scale[16];
    for (int j = 0; j < 16; ++j) {
        const auto bytes = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(db, p + kScales + 16 * j + r0)));
        scale[j] = kQ3 ? hn::Sub(bytes, hn::Set(di, 32)) : hn::And(bytes, hn::Set(di, 0x0F));
        const auto c = kQ3 ? scale[j] : hn::ShiftRight<4>(bytes);
        constant = hn::Add(constant, hn::Mul(c, hn::Set(di, bsums[j])));
    }
    for (int h = 0; h < 4; ++h) {
        const uint8_t* chunk = p + kQs + kChunkBytes * h;
        hn::Vec<DU> hv[2] = {hn::Zero(du), hn::Zero(du)};
        if constexpr (kQ3) {
            hv[0] = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + q3k_group::kHighs + 4 * r0));
            hv[1] = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + q3k_group::kHighs + 64 + 4 * r0));
        }
        hn::Vec<DI> s[4] = {hn::Zero(di), hn::Zero(di), hn::Zero(di), hn::Zero(di)};
        for (int m = 0; m < 4; ++m) {
            const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(chunk + 64 * m + 4 * r0));
            for (int t = 0; t < 4; ++t) {
                const int step = 4 * m + t;
                for (int i = 0; i < 4; ++i) {
                    auto u = hn::And(hn::ShiftRightSame(v, 8 * i + 2 * t), hn::Set(du, 3u));
                    if constexpr (kQ3) {
                        const auto high = hn::And(hn::ShiftRightSame(hv[step / 8], 8 * i + step % 8), hn::Set(du, 1u));
                        u = hn::Or(u, hn::ShiftLeft<2>(high));
                    }
                    s[t] = hn::Add(s[t], hn::Mul(hn::BitCast(di, u), hn::Set(di, xq[64 * h + 16 * t + 4 * m + i])));
                }
            }
        }
        for (int t = 0; t < 4; ++t) scaled = hn::Add(scaled, hn::Mul(s[t], scale[4 * h + t]));
    }
}

// QuantTraits::vec_dot_groups for Q3_K (kQ3) and Q2_K (x_sums unused: Q8_K has its bsums).
template <bool kQ3>
void lowbit_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    constexpr int64_t kBlockBytes = kQ3 ? q3k_group::kBlockBytes : q2k_group::kBlockBytes;
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<256, kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            hn::Vec<DI> scaled, constant;
            super_block_sums<kQ3>(p, r0, xblock, scaled, constant);
            const auto d = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            float dx;
            std::memcpy(&dx, xblock, 4);
            if constexpr (kQ3) {
                const auto sum = hn::Sub(scaled, hn::ShiftLeft<2>(constant));
                return canonical::fused_mul_add(df, hn::Set(df, dx), hn::Mul(d, hn::ConvertTo(df, sum)), acc);
            } else {
                const auto dmin =
                    hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p + q2k_group::kDmin) + r0));
                const auto block = canonical::fused_mul_add(df, hn::Neg(dmin), hn::ConvertTo(df, constant),
                                                            hn::Mul(d, hn::ConvertTo(df, scaled)));
                return canonical::fused_mul_add(df, hn::Set(df, dx), block, acc);
            }
        });
}

}  // namespace portable_lowbit
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // not AVX-512 VNNI
#endif  // include guard
