#version 450
#extension GL_GOOGLE_include_directive : require
// partial[t][r] = the sum of row r's unit dots, each snapped to the 2^-32
// grid (clamped to +-2^16) in double (ops/fixed_sum.h): a tensor-parallel
// rank's exact partial, as SliceForward's matmul_units gives it (a double);
// with as_float, that sum rounded to float (the output a post-norm reads).
#include "exact_math.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Dots { float dots[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Partial { uint partial[]; };
// A mixture of experts' down biases (gpt-oss, with down_bias): each chosen
// expert adds snap(weight * bias[expert][r]) beside its units, as
// SliceForward's add_expert_rows adds it (a grid value: exact in any order).
layout(std430, set = 0, binding = 2) readonly buffer W { float weight[]; };   // [token][expert]
layout(std430, set = 0, binding = 3) readonly buffer E { uint chosen[]; };    // [token][expert]
layout(std430, set = 0, binding = 4) readonly buffer DB { float down_bias[]; };  // [expert][row]
layout(push_constant) uniform Params { uint rows; uint units; uint tokens; uint as_float; uint experts; uint down_bias; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (r >= p.rows || t >= p.tokens) return;
    precise double sum = 0.0;
    // Every unit of each of the token's experts (one for a dense layer): the
    // dots are [token][expert][row][unit]; grid sums add exactly in any order.
    for (uint e = 0; e < p.experts; ++e) for (uint u = 0; u < p.units; ++u) {
        double d = double(dots[((t * p.experts + e) * p.rows + r) * p.units + u]);
        d = d < -65536.0 ? -65536.0 : d;
        d = d > 65536.0 ? 65536.0 : d;
        precise double snapped = (d + 1572864.0) - 1572864.0;
        sum = sum + snapped;
    }
    if (p.down_bias != 0u) {
        for (uint e = 0; e < p.experts; ++e) {
            const uint pair = t * p.experts + e;
            precise float wb = weight[pair] * down_bias[chosen[pair] * p.rows + r];
            double d = double(wb);
            d = d < -65536.0 ? -65536.0 : d;
            d = d > 65536.0 ? 65536.0 : d;
            precise double snapped = (d + 1572864.0) - 1572864.0;
            sum = sum + snapped;
        }
    }
    const uint at = t * p.rows + r;
    if (p.as_float != 0u) {
        partial[at] = floatBitsToUint(nearest_float(sum));
    } else {
        const uvec2 words = unpackDouble2x32(sum);
        partial[2u * at] = words.x;
        partial[2u * at + 1u] = words.y;
    }
}
