#version 450
#extension GL_GOOGLE_include_directive : require
// gate[i] = gelu(gate[i]) * up[i] as ops/activation_hwy.cpp's geglu (GELU's
// tanh form, ggml's constants): inner = (k x) * fma(c x, x, 1), gelu =
// (x / 2) (1 + tanh(inner)), each other operation rounded once; tanh as
// Highway's (hwy_tanh.glsl). Rows of n, contiguous.
#include "exact_math.glsl"
#include "hwy_tanh.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Gate { float gate[]; };
layout(std430, set = 0, binding = 1) readonly buffer Up { float up[]; };
layout(push_constant) uniform Params { uint n; uint tokens; } p;

void main() {
    if (gl_GlobalInvocationID.x >= p.n || gl_GlobalInvocationID.y >= p.tokens) return;
    const uint i = gl_GlobalInvocationID.y * p.n + gl_GlobalInvocationID.x;
    const float x = gate[i];
    precise float cx = 0.044715 * x;
    const float poly = exact_fma(cx, x, 1.0);
    precise float kx = 0.79788456080286535587989211986876 * x;
    precise float inner = kx * poly;
    precise float half_x = 0.5 * x;
    precise float one_plus = 1.0 + hwy_tanh(inner);
    precise float gelu = half_x * one_plus;
    precise float v = gelu * up[i];
    gate[i] = v;
}
