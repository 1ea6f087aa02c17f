#version 450
#extension GL_GOOGLE_include_directive : require
// y[r] = w row r . x for F16 weights and float activations in the canonical
// float order (ops/float_canonical.h's f16_dot_canonical): each weight
// widened to float exactly, then 16 lanes of exact_fma in order, the zero
// padding, and the fixed tree. Rows of n halves are packed (a row may start
// mid-word), so halves are read out of words.
#include "exact_fma.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; uint rows; } p;

float w_half(uint i) { return unpackHalf2x16((w[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu).x; }

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    const uint base = r * p.n;
    for (uint i = 0; i < p.n; ++i) lanes[i % 16] = exact_fma(w_half(base + i), x[i], lanes[i % 16]);
    for (uint i = p.n; i % 16 != 0; ++i) lanes[i % 16] = exact_fma(0.0, 0.0, lanes[i % 16]);
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
    }
    y[r] = lanes[0];
}
