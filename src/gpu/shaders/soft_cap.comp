#version 450
#extension GL_GOOGLE_include_directive : require
// x[i] = cap * tanh(x[i] / cap) as ops/activation_hwy.cpp's soft_cap (Gemma
// 2's scores and logits): the division rounded once, Highway's tanh
// (hwy_tanh.glsl), the product rounded once.
#include "exact_math.glsl"
#include "hwy_tanh.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Params { uint n; float cap; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    precise float v = p.cap * hwy_tanh(exact_div_f(x[i], p.cap));
    x[i] = v;
}
