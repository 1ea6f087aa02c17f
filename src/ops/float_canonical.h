// The canonical order of float sums and dot products (the scalar definition
// that every target's SIMD code reproduces bit for bit; see
// canonical_math-inl.h's Lanes16): element i goes to lane i mod 16 of 16
// lanes, each lane adds its elements in order (a dot product: lane =
// fma(w_i, x_i, lane), the elements padded with zeros to a multiple of 16;
// a sum: lane += x_i, unpadded), and the lanes are added in a fixed tree: lane j +=
// lane j + 8 (j < 8), then + 4, + 2, + 1. Attention's scores, F32/F16 weights
// and softmax's sum use it, so a node's results do not depend on its CPU.
#pragma once

#include <cstdint>

namespace tessera {

float f32_dot_canonical(int64_t n, const float* w, const float* x);
// w: n F16 values (any alignment).
float f16_dot_canonical(int64_t n, const void* w, const float* x);
float sum_canonical(const float* x, int64_t n);

// The tree over 16 lanes (modifies them).
float lanes16_tree(float* lanes);

}  // namespace tessera
