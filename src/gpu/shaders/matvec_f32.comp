#version 450
#extension GL_GOOGLE_include_directive : require
// y[r] = w row r . x in the canonical float order (ops/float_canonical.h):
// element i to lane i mod 16, lane = exact_fma(w_i, x_i, lane) in order, the
// lanes padded to a multiple of 16 with exact_fma(0, 0, lane), then the fixed tree
// (lane j += lane j + 8, + 4, + 2, + 1). `precise` keeps the compiler from
// reassociating or fusing what the source does not; one invocation per row.
#include "exact_fma.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer W { float w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; uint rows; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    const uint base = r * p.n;
    for (uint i = 0; i < p.n; ++i) lanes[i % 16] = exact_fma(w[base + i], x[i], lanes[i % 16]);
    for (uint i = p.n; i % 16 != 0; ++i) lanes[i % 16] = exact_fma(0.0, 0.0, lanes[i % 16]);
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
    }
    y[r] = lanes[0];
}
