// Fixed-point sums that do not depend on their order. Tensor parallel splits
// wo and w_down by columns; each rank's partial is a sum of per-unit dot
// products, and the root adds the ranks' partials. Float addition is not
// associative, so the result would depend on how the units were grouped into
// ranks: a single node and every split would round differently. Each unit's
// dot product is rounded to a float as always, then converted to a 64-bit
// fixed-point integer (2^-40 resolution); integer addition is exact and
// associative, so any grouping of the same units sums to the same bits.
//
// Range: a unit's |dot| up to 2^16 (65536, a half float's range, which
// bounds the activations of models trained in fp16/bf16 mixed precision in
// practice); beyond it, it saturates. Up to 128 saturated units still sum
// inside int64. Resolution 2^-40 (9e-13) per unit, far under a float's
// rounding of the residual it joins.
#pragma once

#include <cstdint>

namespace tessera {

constexpr int kFixedFractionBits = 40;
constexpr double kFixedOne = static_cast<double>(int64_t{1} << kFixedFractionBits);

inline int64_t to_fixed(float v) {
    // Scaling a float by a power of two is exact; truncation toward zero is
    // one deterministic rounding.
    constexpr double kLimit = 72057594037927936.0;  // 2^56
    double d = static_cast<double>(v) * kFixedOne;
    if (!(d < kLimit)) d = d != d ? 0.0 : kLimit;  // NaN -> 0
    if (d < -kLimit) d = -kLimit;
    return static_cast<int64_t>(d);
}

inline double from_fixed(int64_t s) { return static_cast<double>(s) / kFixedOne; }

// x + s, rounded once to float: how a fixed-point partial joins the residual.
inline float add_fixed(float x, int64_t s) { return static_cast<float>(static_cast<double>(x) + from_fixed(s)); }

}  // namespace tessera
