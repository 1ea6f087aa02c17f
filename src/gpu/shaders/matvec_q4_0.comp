#version 450
#extension GL_GOOGLE_include_directive : require
// y[r] = w row r . x for Q4_0 weights and Q8_0 activations in the canonical
// order of ops/row_groups.h: per block b in order, s = the exact integer sum
// of (q - 8) * x over the block (element i < 16 the low nibble of byte i,
// i + 16 its high nibble), acc = exact_fma(float(s), d_w(b) * d_x(b), acc).
// Blocks: Q4_0 18 bytes, Q8_0 34 bytes, packed; bytes read out of words.
#include "exact_fma.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint blocks; uint rows; } p;

uint w_byte(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int signed_byte(uint b) { return int(b << 24) >> 24; }

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows) return;
    precise float acc = 0.0;
    for (uint b = 0; b < p.blocks; ++b) {
        const uint wo = (r * p.blocks + b) * 18u;
        const uint xo = b * 34u;
        int s = 0;
        for (uint i = 0; i < 16u; ++i) {
            const uint q = w_byte(wo + 2u + i);
            s += (int(q & 15u) - 8) * signed_byte(x_byte(xo + 2u + i));
            s += (int(q >> 4) - 8) * signed_byte(x_byte(xo + 18u + i));
        }
        const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
        const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
        precise float d = dw * dx;
        acc = exact_fma(float(s), d, acc);
    }
    y[r] = acc;
}
