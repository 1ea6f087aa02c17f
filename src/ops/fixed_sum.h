// Sums that do not depend on their order. Tensor parallel splits wo and
// w_down by columns; each rank's partial is a sum of per-unit dot products,
// and the root adds the ranks' partials. Float addition is not associative,
// so the result would depend on how the units were grouped into ranks: a
// single node and every split would round differently. So each unit's dot
// product, rounded to a float as always, is then snapped to a fixed grid
// (multiples of 2^-32) and clamped to |v| <= 2^16; sums of up to 32 such
// values stay below 2^21, where a double holds every multiple of 2^-32
// exactly. Double addition of them is therefore exact, and any grouping of
// the same units sums to the same bits.
//
// Why a grid in doubles rather than int64: (v + 1.5 * 2^20) - 1.5 * 2^20
// rounds v to the grid with two packed additions the compiler vectorizes on
// any x86-64 or ARM, where a double-to-int64 conversion is scalar without
// AVX-512. Needs IEEE round-to-nearest and no -ffast-math (never used here).
//
// 2^16 (65536, a half float's range) bounds a unit's dot product in models
// trained in fp16/bf16 mixed precision in practice; beyond it, it
// saturates. The grid's resolution, 2.3e-10, is far below a float's rounding
// of the residual it joins at the magnitudes activations have.
#pragma once

namespace tessera {

constexpr double kGridLimit = 65536.0;
constexpr double kGridSnap = 1.5 * 1048576.0;  // ulp of [2^20, 2^21) = 2^-32

inline double snap_to_grid(float v) {
    // std::clamp's nested branch kept loops of these scalar (~1 ns each, a
    // sixth of a column-split product's time with 8 units); each of these
    // selects is one packed max or min, the same result for every input.
    double d = static_cast<double>(v);
    d = d < -kGridLimit ? -kGridLimit : d;
    d = d > kGridLimit ? kGridLimit : d;
    return (d + kGridSnap) - kGridSnap;
}

// x + s, rounded once to float: how an exact partial joins the residual.
inline float add_exact(float x, double s) { return static_cast<float>(static_cast<double>(x) + s); }

}  // namespace tessera
