// SIMD gates and soft caps: compiled once per CPU target (Highway's
// foreach_target), the best one chosen at run time. exp (tanh) is most of the
// FFN's elementwise cost in a prompt (n_ff per position per layer), hence
// vector math; a soft-capped head runs tanh over the whole vocabulary per
// token.
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

void GegluImpl(float* gate, const float* up, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const auto half = hn::Set(d, 0.5f);
    const auto one = hn::Set(d, 1.0f);
    const auto k = hn::Set(d, 0.79788456080286535587989211986876f);
    const auto c = hn::Set(d, 0.044715f);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const auto x = hn::LoadU(d, gate + i);
        const auto inner = hn::Mul(hn::Mul(k, x), hn::MulAdd(hn::Mul(c, x), x, one));
        const auto gelu = hn::Mul(hn::Mul(half, x), hn::Add(one, hn::Tanh(d, inner)));
        hn::StoreU(hn::Mul(gelu, hn::LoadU(d, up + i)), d, gate + i);
    }
    if (i < n) geglu_scalar(gate + i, up + i, n - i);
}

void SoftCapImpl(float* x, int64_t n, float cap) {
    const hn::ScalableTag<float> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const auto vcap = hn::Set(d, cap);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        hn::StoreU(hn::Mul(vcap, hn::Tanh(d, hn::Div(hn::LoadU(d, x + i), vcap))), d, x + i);
    }
    if (i < n) soft_cap_scalar(x + i, n - i, cap);
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(SwigluImpl);
HWY_EXPORT(GegluImpl);
HWY_EXPORT(SoftCapImpl);

void swiglu(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(gate, up, n); }
void geglu(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(GegluImpl)(gate, up, n); }
void soft_cap(float* x, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftCapImpl)(x, n, cap); }
}  // namespace tessera
#endif
