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

// BF16 weights against BF16 activations (ggml's vec_dot type for BF16): the
// order of AVX-512's vdpbf16ps, so that instruction computes it where the
// CPU has it and fused multiply-adds reproduce it elsewhere. Elements come
// in chunks of 32, zero-padded at the end; lane j of 16 takes the pair 2j,
// 2j + 1 of each chunk, the odd element first: lane = step(w_odd, x_odd,
// lane), then step(w_even, x_even, lane), where step(a, b, c) =
// flush(fma(flush(a), flush(b), c)) and flush turns a value below the
// smallest normal float (in magnitude) into a zero of its sign: the
// instruction's denormals-are-zero inputs and flush-to-zero result. The
// product of two BF16 values is exact in F32, so each step rounds once. The
// lanes then go through lanes16_tree (plain adds, no flushing).
// w, x: n BF16 values each (any alignment).
float bf16_pairs_dot_canonical(int64_t n, const void* w, const void* x);
// One step of it (exposed for the SIMD kernels' tails and tests).
float bf16_pairs_step(float a, float b, float lane);

// The tree over 16 lanes (modifies them).
float lanes16_tree(float* lanes);

}  // namespace tessera
