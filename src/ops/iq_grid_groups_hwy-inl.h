// The grid I-quants in the group layout on every other target (NEON, SSE4,
// Highway's fallback), and IQ1_S / IQ1_M on every target: each row's exact S
// by the shared decoder
// (ops/iq_grid_decode.h, the scalar reference's own code: the lookups bound
// these types), then the canonical float step for a vector of rows at once
// through the portable group loop. Included by iq_grids_hwy.cpp once per
// target (hence the toggling include guard).

#if defined(TESSERA_OPS_IQ_GRID_GROUPS_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ_GRID_GROUPS_HWY_INL_H_
#undef TESSERA_OPS_IQ_GRID_GROUPS_HWY_INL_H_
#else
#define TESSERA_OPS_IQ_GRID_GROUPS_HWY_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/canonical_math-inl.h"
#include "ops/portable_group_loop-inl.h"

#include "ops/iq_grid_decode.h"
#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_iq_grid {
namespace hn = hwy::HWY_NAMESPACE;

template <QuantType kType, size_t kBlockBytes>
void vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y, size_t y_stride,
                    int64_t unit_n, size_t unit_stride, bool accumulate) {
    using DF = portable_loop::DF;
    const DF df;
    const int lanes = static_cast<int>(hn::Lanes(df));
    const IqTables t = iq_tables(kType);
    portable_loop::run<256, kGroupRows * kBlockBytes, q4k_group::kQ8KBytes>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xblock, int, int64_t, hn::Vec<DF> acc) {
            HWY_ALIGN float s[kGroupRows];
            HWY_ALIGN float d[kGroupRows];
            const auto* xq = reinterpret_cast<const int8_t*>(xblock + q4k_group::kQ8KQs);
            for (int i = 0; i < lanes; ++i) {
                const uint8_t* block = p + (r0 + i) * kBlockBytes;
                s[i] = static_cast<float>(iq_block_sum<kType>(block, xq, t));
                d[i] = fp16_to_fp32(iq_block_d_of<kType>(block));
            }
            float dx;
            std::memcpy(&dx, xblock, 4);
            const auto ks = hn::Mul(hn::Set(df, kIqStepFactor<kType>), hn::Load(df, s));
            return canonical::fused_mul_add(df, hn::Set(df, dx), hn::Mul(hn::Load(df, d), ks), acc);
        });
}

}  // namespace portable_iq_grid
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // include guard
