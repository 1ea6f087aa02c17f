#version 450
#extension GL_GOOGLE_include_directive : require
// Stores the K and V rows of `tokens` positions (pos0 on) in one layer's
// caches: [kv_head][position][head_dim] values of the cache's type, F32 (a
// word each) or F16 (two per word, rounded as util/fp16.h rounds). One
// invocation per word of a head's row; y: the row.
#include "half.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 2) writeonly buffer KC { uint kc[]; };
layout(std430, set = 0, binding = 3) writeonly buffer VC { uint vc[]; };
layout(push_constant) uniform Params {
    uint kv_heads; uint head_dim; uint n_ctx; uint pos0; uint tokens; uint stride; uint k_half; uint v_half;
} p;


void main() {
    const uint g = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (g >= p.kv_heads * p.head_dim || t >= p.tokens) return;
    const uint h = g / p.head_dim, i = g % p.head_dim;
    const uint src = t * p.stride + h * p.head_dim + i;
    const uint row = h * p.n_ctx + p.pos0 + t;  // the cached row
    // F32: every invocation a word. F16: the even ones write a word of two.
    if (p.k_half == 0u) {
        kc[row * p.head_dim + i] = floatBitsToUint(k[src]);
    } else if (i % 2u == 0u) {
        kc[row * (p.head_dim / 2u) + i / 2u] = f32_to_f16_bits(k[src]) | (f32_to_f16_bits(k[src + 1u]) << 16);
    }
    if (p.v_half == 0u) {
        vc[row * p.head_dim + i] = floatBitsToUint(v[src]);
    } else if (i % 2u == 0u) {
        vc[row * (p.head_dim / 2u) + i / 2u] = f32_to_f16_bits(v[src]) | (f32_to_f16_bits(v[src + 1u]) << 16);
    }
}
