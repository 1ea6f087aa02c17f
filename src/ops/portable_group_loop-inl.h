// The loop every portable grouped kernel shares (*_groups_hwy-inl.h): each
// group of 16 rows, each column, the rows in runs of a vector's int32 lanes,
// each unit of blocks from 0 (or from what y holds, with accumulate), the
// blocks in order. A kernel supplies only its block step:
//   acc = step(block p, first row r0, activation block xb, column c, block b, acc)
// (a vector of the rows' float sums). Included by the kernels' headers once
// per target (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_PORTABLE_GROUP_LOOP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_PORTABLE_GROUP_LOOP_INL_H_
#undef TESSERA_OPS_PORTABLE_GROUP_LOOP_INL_H_
#else
#define TESSERA_OPS_PORTABLE_GROUP_LOOP_INL_H_
#endif

#include <hwy/highway.h>

#include "ops/row_groups.h"

#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable_loop {
namespace hn = hwy::HWY_NAMESPACE;

// The rows' float sums: as many consecutive rows as int32 lanes, at most 16.
using DF = hn::Rebind<float, hn::CappedTag<int32_t, kGroupRows>>;

// kBlock elements, kBlockBytes group bytes and kActBytes activation bytes a block.
template <int64_t kBlock, int64_t kBlockBytes, int64_t kActBytes, class Step>
HWY_INLINE void run(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    int n_cols, float* y, size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate,
                    const Step& step) {
    const DF df;
    const int lanes = static_cast<int>(hn::Lanes(df));
    const int64_t nb = n / kBlock;
    const int64_t unit_nb = (unit_n > 0 && unit_n < n ? unit_n : n) / kBlock;
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int g = 0; g < n_groups; ++g) {
        const uint8_t* group = wb + g * group_stride;
        for (int c = 0; c < n_cols; ++c) {
            const uint8_t* xc = xb + c * x_stride;
            for (int r0 = 0; r0 < kGroupRows; r0 += lanes) {
                float* yr = y + c * y_stride + g * kGroupRows + r0;
                for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
                    float* out = yr + u * unit_stride;
                    auto acc = accumulate ? hn::LoadU(df, out) : hn::Zero(df);
                    const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
                    for (int64_t b = u0; b < u1; ++b) acc = step(group + b * kBlockBytes, r0, xc + b * kActBytes, c, b, acc);
                    hn::StoreU(acc, df, out);
                }
            }
        }
    }
}

}  // namespace portable_loop
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // include guard
