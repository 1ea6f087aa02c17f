#version 450
#extension GL_GOOGLE_include_directive : require
// Products of F32 weights and float activations in the canonical float
// order (ops/float_canonical.h): element i to lane i mod 16, lane =
// exact_fma(w_i, x_i, lane) in order, the lanes padded to a multiple of 16
// with exact_fma(0, 0, lane), then the fixed tree (lane j += lane j + 8, + 4,
// + 2, + 1). `precise` keeps the compiler from reassociating or fusing what
// the source does not. Indexing: matmul_common.glsl.
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };

float unit_dot(uint r, uint t, uint first, uint count) {
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    const uint wbase = r * p.row_blocks + p.col_begin + first;
    const uint xbase = t * p.x_stride + first;
    for (uint i = 0; i < count; ++i) {
        lanes[i % 16] = exact_fma(uintBitsToFloat(w[wbase + i]), x[xbase + i], lanes[i % 16]);
    }
    for (uint i = count; i % 16 != 0; ++i) lanes[i % 16] = exact_fma(0.0, 0.0, lanes[i % 16]);
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
    }
    return lanes[0];
}
