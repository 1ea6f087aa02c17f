#version 450
#extension GL_GOOGLE_include_directive : require
// Float rows to Q8_K blocks (292 bytes: float d, 256 codes, 16 int16 sums)
// as ops/kquant_scalar.cpp's q8_k_from_float: max = the first element of
// the largest magnitude, iscale = -127 / max rounded once, codes
// min(127, nearest_int(iscale * x)) (ties to even), sums of 16 codes, d =
// 1 / iscale rounded once. One invocation per block (whole words).
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Q { uint q[]; };
layout(push_constant) uniform Params { uint blocks; } p;

void main() {
    const uint k = gl_GlobalInvocationID.x;
    if (k >= p.blocks) return;
    const uint base = 256u * k, wo = 73u * k;
    float mx = 0.0, amax = 0.0;
    for (uint i = 0; i < 256u; ++i) {
        const float v = x[base + i];
        if (abs(v) > amax) {
            amax = abs(v);
            mx = v;
        }
    }
    if (amax == 0.0) {
        for (uint j = 0; j < 73u; ++j) q[wo + j] = 0u;
        return;
    }
    const float iscale = exact_div_f(-127.0, mx);
    q[wo] = floatBitsToUint(exact_recip_f(iscale));
    int sum = 0;
    uint word = 0u, low_sum = 0u;
    for (uint i = 0; i < 256u; ++i) {
        precise float v = iscale * x[base + i];
        const int c = min(127, int(roundEven(v)));
        sum += c;
        word |= (uint(c) & 0xffu) << (8u * (i % 4u));
        if (i % 4u == 3u) {
            q[wo + 1u + i / 4u] = word;
            word = 0u;
        }
        if (i % 16u == 15u) {
            const uint s = uint(sum) & 0xffffu;
            if ((i / 16u) % 2u == 0u) {
                low_sum = s;
            } else {
                q[wo + 65u + (i / 16u) / 2u] = low_sum | (s << 16);
            }
            sum = 0;
        }
    }
}
