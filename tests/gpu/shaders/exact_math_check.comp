#version 450
#extension GL_GOOGLE_include_directive : require
// Runs exact_math.glsl's helpers on pairs (a, b) for test_exact_math.cpp:
// out[4i] = exact_fma(a, b, a * 0.5), out[4i+1] = exact_sqrt_f(|a|),
// out[4i+2] = exact_recip_f(|a|), out[4i+3] = nearest_float(exact_div_d(a, |b|))
// with a and b widened to double and a scaled by 2^-20 to make the quotient's
// last bits matter.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float v[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { uint n; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    const float a = v[2u * i];
    const float b = v[2u * i + 1u];
    precise float half_a = a * 0.5;
    o[4u * i] = exact_fma(a, b, half_a);
    o[4u * i + 1u] = exact_sqrt_f(abs(a));
    o[4u * i + 2u] = exact_recip_f(abs(a));
    precise double scaled = double(a) * 9.5367431640625e-07 + double(b);  // a 2^-20 + b: many bits
    o[4u * i + 3u] = nearest_float(exact_div_d(scaled, double(abs(b)) + 3.0));
}
