#version 450
#extension GL_GOOGLE_include_directive : require
// RMS norm of each row as ops/norm.cpp computes it: the float squares summed
// in double into 8 partial sums (element i into sum i % 8, in order), then
// added in order; the
// mean rounded to double and then to float; scale = 1 / sqrt(mean + eps) with
// each operation rounded once (exact_math.glsl: Vulkan's own division and
// square root may be off by a few units); out = x * scale * weight.
#include "exact_math.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Params { uint n; uint rows; float eps; } p;

const uint kChunk = 2048u;  // elements staged in shared memory at once (a multiple of 8: element c0 + j is j's part)
shared float squares[kChunk];
shared double part[8];
shared float row_scale;

// One workgroup per row (rows beyond the dispatch's width loop): the row's
// float squares staged in shared memory a chunk at a time by all 256
// threads (8 independent loads each: read from device memory by the 8 chains
// themselves, or by 64 threads one after another, a norm of 4096 took 40 us
// on an H200), the 8 partial sums on 8 threads, each in its own order
// (element i to part i % 8, in order; 8 shared reads ahead of the adds,
// adding +0.0 past the end, which changes no sum of squares), then one
// thread adds them and takes the scale, then every thread scales its
// elements.
void main() {
    const uint lid = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        const uint base = r * p.n;
        precise double acc = 0.0;  // part lid's chain (lid < 8)
        for (uint c0 = 0u; c0 < p.n; c0 += kChunk) {
            const uint width = min(kChunk, p.n - c0);
            for (uint j = lid; j < width; j += 256u) {
                precise float sq = x[base + c0 + j] * x[base + c0 + j];
                squares[j] = sq;
            }
            barrier();
            if (lid < 8u) {
                for (uint j = lid; j < width; j += 64u) {
                    float ahead[8];
                    for (uint u = 0u; u < 8u; ++u) ahead[u] = j + 8u * u < width ? squares[j + 8u * u] : 0.0;
                    for (uint u = 0u; u < 8u; ++u) acc = acc + double(ahead[u]);
                }
            }
            barrier();
        }
        if (lid < 8u) part[lid] = acc;
        barrier();
        if (lid == 0u) {
            precise double sum = 0.0;
            for (int k = 0; k < 8; ++k) sum = sum + part[k];
            const float mean = nearest_float(exact_div_d(sum, double(p.n)));
            precise float shifted = mean + p.eps;
            row_scale = exact_recip_f(exact_sqrt_f(shifted));
        }
        barrier();
        const float scale = row_scale;
        for (uint j = lid; j < p.n; j += 256u) {
            precise float scaled = x[base + j] * scale;
            precise float v = scaled * weight[j];
            out_[base + j] = v;
        }
        barrier();  // x may be out_ (in place): every read of this row is done before the next row's
    }
}
