// SIMD softmax: compiled once per CPU target (Highway's foreach_target), the
// best one chosen at run time. Attention takes one exp per score, which makes
// this the largest elementwise cost of a long prompt.
//
// The same bits on every target (the exact modes need a node's attention not
// to depend on its CPU): the max is order-free; every element's exp is
// canonical::exp (the last partial vector padded, never a scalar exp); the
// sum runs in the 16 virtual lanes of float_canonical.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/softmax_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/canonical_math-inl.h"
#include "ops/float_canonical.h"
#include "ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SoftmaxImpl(float* x, int64_t n) {
    if (n <= 0) return;
    const hn::CappedTag<float, 16> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    int64_t i = 0;
    float max = x[0];
    if (n >= lanes) {
        auto vmax = hn::LoadU(d, x);
        for (i = lanes; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
        max = hn::GetLane(hn::MaxOfLanes(d, vmax));
    }
    for (; i < n; ++i) max = std::max(max, x[i]);

    const auto vmax_all = hn::Set(d, max);
    for (i = 0; i + lanes <= n; i += lanes) {
        hn::StoreU(canonical::exp(d, hn::Sub(hn::LoadU(d, x + i), vmax_all)), d, x + i);
    }
    if (i < n) {
        // The last elements through the same vector code, padded.
        HWY_ALIGN float tail[16];
        std::fill(tail, tail + 16, -std::numeric_limits<float>::infinity());
        std::copy(x + i, x + n, tail);
        hn::Store(canonical::exp(d, hn::Sub(hn::Load(d, tail), vmax_all)), d, tail);
        std::copy(tail, tail + (n - i), x + i);
    }

#if HWY_HAVE_SCALABLE
    const float sum = sum_canonical(x, n);
#else
    canonical::Lanes16<decltype(d)> acc;
    for (i = 0; i + 16 <= n; i += 16) acc.add([&](size_t o) { return hn::LoadU(d, x + i + o); });
    HWY_ALIGN float sums[16];
    acc.store(sums);
    for (int64_t j = i; j < n; ++j) sums[j - i] += x[j];
    const float sum = lanes16_tree(sums);
#endif
    const float inv = 1.0f / sum;
    const auto vinv = hn::Set(d, inv);
    for (i = 0; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vinv), d, x + i);
    for (; i < n; ++i) x[i] *= inv;
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(SoftmaxImpl);

void softmax(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n); }
}  // namespace tessera
#endif
