#version 450
#extension GL_GOOGLE_include_directive : require
// Products of Q4_0 weights and Q8_0 activations in the canonical order of
// ops/row_groups.h: per block, s = the exact integer sum of (q - 8) * x
// (element i < 16 the low nibble of byte i, i + 16 its high nibble), acc =
// fma(float(s), d_w * d_x, acc). Blocks: Q4_0 18 bytes, Q8_0 34, packed. The
// threads' layout: matmul_common.glsl.
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }

void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 18u;
    const uint xo = (t * p.x_stride + b) * 34u;
    int s = 0;
    for (uint i = 0; i < 16u; ++i) {
        const uint q = w_byte(wo + 2u + i);
        s += (int(q & 15u) - 8) * signed_byte(x_byte(xo + 2u + i));
        s += (int(q >> 4) - 8) * signed_byte(x_byte(xo + 18u + i));
    }
    const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
    precise float dd = dw * dx;
    a = float(s);
    d = dd;
}
