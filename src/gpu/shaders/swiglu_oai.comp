#version 450
#extension GL_GOOGLE_include_directive : require
// gate[i] as ops/activation_hwy.cpp's swiglu_oai (gpt-oss): x = min(g, 7),
// y = clamp(u, -7, 7), x / (1 + exp(-1.702 x)) * (y + 1), exp the canonical
// one, the division rounded once, every other operation rounded once. Rows
// of n, contiguous.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(push_constant) uniform Params { uint n; uint tokens; } p;

void main() {
    if (gl_GlobalInvocationID.x >= p.n || gl_GlobalInvocationID.y >= p.tokens) return;
    const uint i = gl_GlobalInvocationID.y * p.n + gl_GlobalInvocationID.x;
    const float x = min(gate[i], 7.0);
    const float y = min(max(up[i], -7.0), 7.0);
    precise float ax = 1.702 * x;
    precise float denominator = 1.0 + canonical_exp(-ax);
    precise float y1 = y + 1.0;
    precise float v = exact_div_f(x, denominator) * y1;
    gate[i] = v;
}
