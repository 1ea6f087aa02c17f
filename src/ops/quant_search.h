// The scale searches of llama.cpp's reference quantizers (ggml-quants.c),
// rounding and order of operations included, so that a tensor quantized by
// `tessera quantize` has the bytes `llama-quantize` writes without an
// importance matrix. Every block quantizer of the K- and I-quant types is
// built from these.
#pragma once

#include <cstdint>

namespace tessera::quant_search {

// Below this a group of weights is all zero (llama.cpp's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even: what llama.cpp's nearest_int (the
// 1.5 * 2^23 addition trick) computes for the magnitudes met here.
int nearest_int(float x);

// make_qkx2_quants (and llama.cpp's make_qkx3_quants, the same search when
// given weights, as its importance-matrix quantizers do): codes L in [0, nmax] and (scale, min) with
// x ~ scale * L - min, minimizing the weighted squared (or, use_mad,
// absolute) error over nstep + 1 inverse scales, each followed by a
// least-squares fit. Returns the scale; *the_min >= 0.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// make_qx_quants with rmse_type 1: codes L in [0, 2 nmax) for l + nmax, l
// in [-nmax, nmax - 1], under weights qw (nullptr: x^2); returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw = nullptr);

// make_q3_quants with do_rmse: symmetric codes as make_qx_quants, refined by
// up to 5 passes moving one code at a time; returns the scale.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// make_qp_quants: non-negative codes L in [0, nmax] (kept in bytes, as
// llama.cpp keeps them: a negative rounding wraps) with x ~ scale * L under
// weights w, 8 nearby inverse scales tried, then up to 5 passes moving one
// code at a time; returns the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w);

// The index of the value of `values` (n ascending int8 values) nearest to x
// (best_index_int8: ties go up).
int best_index_int8(int n, const int8_t* values, float x);

}  // namespace tessera::quant_search
