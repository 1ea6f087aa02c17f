// Arithmetic that gives the same bits on every CPU target, for the exact
// distributed modes (a node's results must not depend on its CPU kind):
// - fused_mul_add: acc + a * b with one rounding. The canonical orders of the
//   grouped kernels (ops/row_groups.h) are written in fused multiply-adds, and
//   a target without one (SSE4, EMU128, 32-bit NEON) takes std::fma per lane:
//   slower, but the same bits as every other node.
// - exp: one algorithm in those fused steps, where Highway's Exp rounds
//   differently on targets without FMA.
// - Lanes16: a float sum or dot product in 16 virtual lanes, whatever the
//   vector width (1 x 16 lanes on AVX-512, 2 x 8 on AVX2, 4 x 4 on 128-bit
//   targets, 16 x 1 on the scalar fallback): element i goes to lane i mod 16,
//   each lane adds its elements in order, and the lanes are added in a fixed
//   tree (j + 8, then + 4, + 2, + 1).
// Included by each SIMD file once per target (hence the toggling include
// guard), inside nothing.

#if defined(TESSERA_OPS_FUSED_MUL_ADD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#undef TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#else
#define TESSERA_OPS_FUSED_MUL_ADD_INL_H_
#endif

#include <hwy/highway.h>

#include "ops/float_canonical.h"

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

// e^x, within about 2 ulp, the same bits on every target: n = round(x log2 e),
// r = x - n ln 2 in two fused steps (Cody and Waite's split of ln 2), e^r by
// its Taylor polynomial of degree 7 in Horner's fused steps (|r| <= 0.347:
// the truncation is below 1e-9), times 2^n through the exponent bits. x is
// clamped to 88 above (e^88 is finite), and below -87 the result is 0 (e^-87
// is near the smallest normal float); NaN stays NaN.
template <class DF>
HWY_INLINE hn::Vec<DF> exp(DF df, hn::Vec<DF> x) {
    const hn::RebindToSigned<DF> di;
    const auto xc = hn::Min(x, hn::Set(df, 88.0f));
    const auto n = hn::Round(hn::Mul(xc, hn::Set(df, 1.44269504088896341f)));
    auto r = fused_mul_add(df, hn::Neg(n), hn::Set(df, 0.693145751953125f), xc);
    r = fused_mul_add(df, hn::Neg(n), hn::Set(df, 1.42860682030941723212e-6f), r);
    auto p = hn::Set(df, 1.0f / 5040.0f);
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f / 720.0f));
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f / 120.0f));
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f / 24.0f));
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f / 6.0f));
    p = fused_mul_add(df, p, r, hn::Set(df, 0.5f));
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f));
    p = fused_mul_add(df, p, r, hn::Set(df, 1.0f));
    // n is in [-126, 127] wherever the result is kept: 2^n is a normal float.
    const auto n_int = hn::ConvertTo(di, hn::Max(n, hn::Set(df, -126.0f)));
    const auto scale = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(n_int, hn::Set(di, 127))));
    const auto e = hn::IfThenZeroElse(hn::Lt(x, hn::Set(df, -87.0f)), hn::Mul(p, scale));
    return hn::IfThenElse(hn::IsNaN(x), x, e);
}

// A sum (or dot product) in the 16 virtual lanes described above, fed 16
// elements at a time: each call takes the elements [i, i + 16) through
// f(offset), which returns the vector of elements [i + offset, i + offset + N)
// of a CappedTag<float, 16> (N lanes). The last elements (fewer than 16) are
// fed padded with zeros, then reduce() gives the total; or they go through
// store(): the caller adds them into lanes[j - i] itself, then takes
// tree(lanes).
#if !HWY_HAVE_SCALABLE  // scalable vectors cannot be class members
template <class DF>
class Lanes16 {
public:
    static_assert(hn::MaxLanes(DF()) <= 16);
    Lanes16() : df_(), a0_(hn::Zero(df_)), a1_(a0_), a2_(a0_), a3_(a0_) {}

    // lane j += t[j].
    template <class T>
    HWY_INLINE void add(T t) {
        apply([&](size_t offset, hn::Vec<DF> lane) { return hn::Add(lane, t(offset)); });
    }
    // lane j = fma(w[j], x[j], lane j).
    template <class W, class X>
    HWY_INLINE void mul_add(W w, X x) {
        apply([&](size_t offset, hn::Vec<DF> lane) { return fused_mul_add(df_, w(offset), x(offset), lane); });
    }

    // The 16 lanes, in order.
    HWY_INLINE void store(float* lanes) const {
        if constexpr (hn::MaxLanes(DF()) == 1) {
            for (int j = 0; j < 16; ++j) lanes[j] = scalar_[j];
        } else {
            const size_t n = hn::Lanes(df_);
            hn::StoreU(a0_, df_, lanes);
            if (n < 16) hn::StoreU(a1_, df_, lanes + n);
            if (n < 8) {
                hn::StoreU(a2_, df_, lanes + 2 * n);
                hn::StoreU(a3_, df_, lanes + 3 * n);
            }
        }
    }

    // The 16 lanes back from store(), to go on adding where it stopped: the
    // lanes' order of additions does not change.
    HWY_INLINE void load(const float* lanes) {
        if constexpr (hn::MaxLanes(DF()) == 1) {
            for (int j = 0; j < 16; ++j) scalar_[j] = lanes[j];
        } else {
            const size_t n = hn::Lanes(df_);
            a0_ = hn::LoadU(df_, lanes);
            if (n < 16) a1_ = hn::LoadU(df_, lanes + n);
            if (n < 8) {
                a2_ = hn::LoadU(df_, lanes + 2 * n);
                a3_ = hn::LoadU(df_, lanes + 3 * n);
            }
        }
    }

    // The fixed tree over 16 lanes: lane j + lane j + 8, then + 4, + 2, + 1.
    static float tree(float* lanes) { return lanes16_tree(lanes); }

    // The same tree in registers (when every element went through add or
    // mul_add): the vectors' halves are lanes j and j + 8, then j + 4, ...
    HWY_INLINE float reduce() const {
#if HWY_TARGET == HWY_SCALAR
        float lanes[16];
        store(lanes);
        return tree(lanes);
#else
        const size_t n = hn::Lanes(df_);
        if (n == 16) return halves(df_, a0_);
        if (n == 8) return halves(df_, hn::Add(a0_, a1_));
        return halves(df_, hn::Add(hn::Add(a0_, a2_), hn::Add(a1_, a3_)));
#endif
    }

private:
    DF df_;
    // 16 lanes as 16 / N vectors: a0 (N = 16), a0 a1 (N = 8), a0 .. a3 (N = 4).
    hn::Vec<DF> a0_, a1_, a2_, a3_;
    float scalar_[16] = {};  // N = 1 (the scalar fallback target)

#if HWY_TARGET != HWY_SCALAR
    // Lane j + lane j + N/2, down to one lane.
    template <class D>
    static HWY_INLINE float halves(D d, hn::Vec<D> v) {
        if constexpr (hn::MaxLanes(D()) == 1) {
            return hn::GetLane(v);
        } else {
            const hn::Half<D> dh;
            return halves(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
        }
    }
#endif

    template <class Op>
    HWY_INLINE void apply(Op op) {
        if constexpr (hn::MaxLanes(DF()) == 1) {
            for (size_t j = 0; j < 16; ++j) scalar_[j] = hn::GetLane(op(j, hn::Set(df_, scalar_[j])));
        } else {
            const size_t n = hn::Lanes(df_);
            a0_ = op(0, a0_);
            if (n < 16) a1_ = op(n, a1_);
            if (n < 8) {
                a2_ = op(2 * n, a2_);
                a3_ = op(3 * n, a3_);
            }
        }
    }
};
#endif  // !HWY_HAVE_SCALABLE

}  // namespace canonical
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // include guard
