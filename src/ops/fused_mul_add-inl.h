// acc + a * b with one rounding on every target: the canonical orders of the
// grouped kernels (ops/row_groups.h) are written in fused multiply-adds, and a
// target without one (SSE4, EMU128, 32-bit NEON) takes std::fma per lane:
// slower, but the same bits as every other node. Included by each SIMD file
// once per target (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_FUSED_MUL_ADD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#undef TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#else
#define TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace canonical {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> fused_mul_add(DF df, hn::Vec<DF> a, hn::Vec<DF> b, hn::Vec<DF> acc) {
#if HWY_NATIVE_FMA
    (void)df;
    return hn::MulAdd(a, b, acc);
#else
    constexpr size_t kMax = 64 / sizeof(float);
    static_assert(hn::MaxLanes(DF()) <= kMax);
    HWY_ALIGN float va[kMax], vb[kMax], vc[kMax];
    hn::Store(a, df, va);
    hn::Store(b, df, vb);
    hn::Store(acc, df, vc);
    for (size_t i = 0; i < hn::Lanes(df); ++i) vc[i] = std::fma(va[i], vb[i], vc[i]);
    return hn::Load(df, vc);
#endif
}

}  // namespace canonical
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // include guard
