#version 450
#extension GL_GOOGLE_include_directive : require
// gate[i] = silu(gate[i]) * up[i] as ops/activation_hwy.cpp computes it:
// g / (1 + canonical_exp(-g)) * u, each operation rounded once.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(push_constant) uniform Params { uint n; uint tokens; } p;  // rows of n, contiguous

void main() {
    if (gl_GlobalInvocationID.x >= p.n || gl_GlobalInvocationID.y >= p.tokens) return;
    const uint i = gl_GlobalInvocationID.y * p.n + gl_GlobalInvocationID.x;
    const float g = gate[i];
    precise float denominator = 1.0 + canonical_exp(-g);
    const float silu = exact_div_f(g, denominator);
    precise float v = silu * up[i];
    gate[i] = v;
}
