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
#include "ops/canonical_math-inl.h"

#include <algorithm>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DC = hn::CappedTag<float, 16>;

// Applies f (a vector function of the elements of x and of y, when given) to
// every element of x, the last partial vector padded with zeros: no element
// takes a scalar path, so each gets the same bits whatever the vector width.
template <class F>
HWY_INLINE void elementwise(float* x, const float* y, int64_t n, F f) {
    const DC d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        hn::StoreU(f(hn::LoadU(d, x + i), y != nullptr ? hn::LoadU(d, y + i) : hn::Zero(d)), d, x + i);
    }
    if (i < n) {
        HWY_ALIGN float tx[16] = {}, ty[16] = {};
        std::copy(x + i, x + n, tx);
        if (y != nullptr) std::copy(y + i, y + n, ty);
        hn::Store(f(hn::Load(d, tx), hn::Load(d, ty)), d, tx);
        std::copy(tx, tx + (n - i), x + i);
    }
}

// silu(g) = g / (1 + e^-g), with canonical::exp: the same bits on every target.
void SwigluImpl(float* gate, const float* up, int64_t n) {
    const DC d;
    const auto one = hn::Set(d, 1.0f);
    elementwise(gate, up, n, [&](hn::Vec<DC> g, hn::Vec<DC> u) {
        return hn::Mul(hn::Div(g, hn::Add(one, canonical::exp(d, hn::Neg(g)))), u);
    });
}

// gpt-oss's: the gate clamped from above, up from both sides, a sigmoid of
// 1.702 g (canonical::exp: the same bits on every target).
void SwigluOaiImpl(float* gate, const float* up, int64_t n) {
    const DC d;
    const auto one = hn::Set(d, 1.0f);
    const auto limit = hn::Set(d, 7.0f);
    const auto alpha = hn::Set(d, 1.702f);
    elementwise(gate, up, n, [&](hn::Vec<DC> g, hn::Vec<DC> u) {
        const auto x = hn::Min(g, limit);
        const auto y = hn::Min(hn::Max(u, hn::Neg(limit)), limit);
        return hn::Mul(hn::Div(x, hn::Add(one, canonical::exp(d, hn::Neg(hn::Mul(alpha, x))))), hn::Add(y, one));
    });
}

// GELU's tanh form and the soft cap take Highway's Tanh: the same bits on
// targets with FMA (AVX2, AVX-512, NEON); SSE4 and the fallback round it
// differently (Gemma only).
void GegluImpl(float* gate, const float* up, int64_t n) {
    const DC d;
    const auto half = hn::Set(d, 0.5f);
    const auto one = hn::Set(d, 1.0f);
    const auto k = hn::Set(d, 0.79788456080286535587989211986876f);
    const auto c = hn::Set(d, 0.044715f);
    elementwise(gate, up, n, [&](hn::Vec<DC> x, hn::Vec<DC> u) {
        const auto inner = hn::Mul(hn::Mul(k, x), canonical::fused_mul_add(d, hn::Mul(c, x), x, one));
        const auto gelu = hn::Mul(hn::Mul(half, x), hn::Add(one, hn::Tanh(d, inner)));
        return hn::Mul(gelu, u);
    });
}

void SoftCapImpl(float* x, int64_t n, float cap) {
    const DC d;
    const auto vcap = hn::Set(d, cap);
    elementwise(x, nullptr, n, [&](hn::Vec<DC> v, hn::Vec<DC>) { return hn::Mul(vcap, hn::Tanh(d, hn::Div(v, vcap))); });
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(SwigluImpl);
HWY_EXPORT(GegluImpl);
HWY_EXPORT(SwigluOaiImpl);
HWY_EXPORT(SoftCapImpl);

void swiglu(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(gate, up, n); }
void geglu(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(GegluImpl)(gate, up, n); }
void swiglu_oai(float* gate, const float* up, int64_t n) { HWY_DYNAMIC_DISPATCH(SwigluOaiImpl)(gate, up, n); }
void soft_cap(float* x, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftCapImpl)(x, n, cap); }
}  // namespace tessera
#endif
