// SIMD SwiGLU: compiled once per CPU target (Highway's foreach_target), the
// best one chosen at run time. exp is most of the FFN's elementwise cost in a
// prompt (n_ff exps per position per layer), hence a vector exp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/activation_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "ops/activation.h"

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SwigluImpl(float* gate, const float* up, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const auto one = hn::Set(d, 1.0f);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const auto g = hn::LoadU(d, gate + i);
        const auto silu = hn::Div(g, hn::Add(one, hn::Exp(d, hn::Neg(g))));
        hn::StoreU(hn::Mul(silu, hn::LoadU(d, up + i)), d, gate + i);
    }
    if (i < n) swiglu_scalar(gate + i, up + i, n - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(SwigluImpl);

void swiglu(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(gate, up, n); }
}  // namespace tessera
#endif
