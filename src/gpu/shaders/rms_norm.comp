#version 450
#extension GL_GOOGLE_include_directive : require
// RMS norm of each row as ops/norm.cpp computes it: the float squares summed
// in double into 8 partial sums in a fixed order, then added in order; the
// mean rounded to double and then to float; scale = 1 / sqrt(mean + eps) with
// each operation rounded once (exact_math.glsl: Vulkan's own division and
// square root may be off by a few units); out = x * scale * weight.
// One invocation per row.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Params { uint n; uint rows; float eps; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    const uint base = r * p.n;
    precise double part[8];
    for (int k = 0; k < 8; ++k) part[k] = 0.0;
    uint i = 0;
    for (; i + 8u <= p.n; i += 8u) {
        for (uint k = 0; k < 8u; ++k) {
            precise float sq = x[base + i + k] * x[base + i + k];
            part[k] = part[k] + double(sq);
        }
    }
    for (uint k = 0; i < p.n; ++i, ++k) {
        precise float sq = x[base + i] * x[base + i];
        part[k] = part[k] + double(sq);
    }
    precise double sum = 0.0;
    for (int k = 0; k < 8; ++k) sum = sum + part[k];
    const float mean = nearest_float(exact_div_d(sum, double(p.n)));
    precise float shifted = mean + p.eps;
    const float scale = exact_recip_f(exact_sqrt_f(shifted));
    for (uint j = 0; j < p.n; ++j) {
        precise float scaled = x[base + j] * scale;
        precise float v = scaled * weight[j];
        out_[base + j] = v;
    }
}
