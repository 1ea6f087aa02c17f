// SIMD softmax: compiled once per CPU target (Highway's foreach_target), the
// best one chosen at run time. Attention takes one exp per score, which makes
// this the largest elementwise cost of a long prompt.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/softmax_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "ops/softmax.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SoftmaxImpl(float* x, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    if (n < lanes) {
        softmax_scalar(x, n);
        return;
    }
    auto vmax = hn::LoadU(d, x);
    int64_t i = lanes;
    for (; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
    float max = hn::GetLane(hn::MaxOfLanes(d, vmax));
    for (; i < n; ++i) max = std::max(max, x[i]);

    const auto vmax_all = hn::Set(d, max);
    auto vsum = hn::Zero(d);
    for (i = 0; i + lanes <= n; i += lanes) {
        const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmax_all));
        hn::StoreU(e, d, x + i);
        vsum = hn::Add(vsum, e);
    }
    double sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const auto inv = hn::Set(d, static_cast<float>(1.0 / sum));
    for (i = 0; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), inv), d, x + i);
    for (; i < n; ++i) x[i] *= static_cast<float>(1.0 / sum);
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
