#version 450
#extension GL_GOOGLE_include_directive : require
// Float rows to Q8_K blocks (292 bytes: float d, 256 codes, 16 int16 sums)
// as ops/kquant_scalar.cpp's q8_k_from_float: max = the first element of
// the largest magnitude, iscale = -127 / max rounded once, codes
// min(127, nearest_int(iscale * x)) (ties to even), sums of 16 codes, d =
// 1 / iscale rounded once.
#include "exact_math.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Q { uint q[]; };
layout(push_constant) uniform Params { uint blocks; } p;

shared float top_abs[64];
shared uint top_at[64];
shared int quarter_sums[64];

// One workgroup per block (blocks beyond the dispatch's width loop; one
// invocation a block took 8.6 us on an H200, serial between a token's
// products): invocation j takes elements 4j..4j+3, one word of codes. The
// largest magnitude and its first position by a tree over the invocations
// (a larger magnitude wins, equal ones the earlier position: the CPU's
// first of the largest; NaN never wins, as the CPU's comparison never takes
// it); the 16-code sums from 4 invocations' exact integers.
void main() {
    const uint j = gl_LocalInvocationID.x;
    for (uint k = gl_WorkGroupID.x; k < p.blocks; k += gl_NumWorkGroups.x) {
        const uint base = 256u * k + 4u * j, wo = 73u * k;
        const vec4 v = vec4(x[base], x[base + 1u], x[base + 2u], x[base + 3u]);
        float amax = 0.0;
        uint at = 0xffffffffu;
        for (uint i = 0u; i < 4u; ++i) {
            if (abs(v[i]) > amax) {
                amax = abs(v[i]);
                at = 4u * j + i;
            }
        }
        top_abs[j] = amax;
        top_at[j] = at;
        barrier();
        for (uint half_width = 32u; half_width >= 1u; half_width /= 2u) {
            if (j < half_width) {
                const float other = top_abs[j + half_width];
                const uint other_at = top_at[j + half_width];
                if (other > top_abs[j] || (other == top_abs[j] && other_at < top_at[j])) {
                    top_abs[j] = other;
                    top_at[j] = other_at;
                }
            }
            barrier();
        }
        const float largest = top_abs[0];
        const uint largest_at = top_at[0];
        barrier();  // every invocation has read the winner before the next block's tree
        if (largest == 0.0) {
            q[wo + 1u + j] = 0u;
            if (j == 0u) q[wo] = 0u;
            if (j < 8u) q[wo + 65u + j] = 0u;
            continue;
        }
        const float mx = x[256u * k + largest_at];
        const float iscale = exact_div_f(-127.0, mx);
        if (j == 0u) q[wo] = floatBitsToUint(exact_recip_f(iscale));
        uint word = 0u;
        int sum = 0;
        for (uint i = 0u; i < 4u; ++i) {
            precise float scaled = iscale * v[i];
            const int c = min(127, int(roundEven(scaled)));
            sum += c;
            word |= (uint(c) & 0xffu) << (8u * i);
        }
        q[wo + 1u + j] = word;
        quarter_sums[j] = sum;
        barrier();
        if (j < 8u) {  // sums of 16 codes 2j and 2j + 1, as two int16 in word 65 + j
            const int low = quarter_sums[8u * j] + quarter_sums[8u * j + 1u] + quarter_sums[8u * j + 2u] +
                            quarter_sums[8u * j + 3u];
            const int high = quarter_sums[8u * j + 4u] + quarter_sums[8u * j + 5u] + quarter_sums[8u * j + 6u] +
                             quarter_sums[8u * j + 7u];
            q[wo + 65u + j] = (uint(low) & 0xffffu) | ((uint(high) & 0xffffu) << 16);
        }
        barrier();
    }
}
