#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax of each row as ops/softmax_hwy.cpp computes it: the maximum, e^(x -
// max) by canonical_exp, their sum in the 16 lanes (element i to lane i mod
// 16, unpadded) added in the fixed tree, then every element times 1 / sum
// rounded once. One invocation per row.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Params { uint n; uint rows; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    const uint base = r * p.n;
    float m = x[base];
    for (uint i = 1; i < p.n; ++i) m = max(m, x[base + i]);
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    for (uint i = 0; i < p.n; ++i) {
        precise float shifted = x[base + i] - m;
        const float e = canonical_exp(shifted);
        x[base + i] = e;
        lanes[i % 16] = lanes[i % 16] + e;
    }
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
    }
    const float inv = exact_recip_f(lanes[0]);
    for (uint i = 0; i < p.n; ++i) {
        precise float v = x[base + i] * inv;
        x[base + i] = v;
    }
}
