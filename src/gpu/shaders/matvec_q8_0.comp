#version 450
#extension GL_GOOGLE_include_directive : require
// Products of Q8_0 weights and Q8_0 activations in the canonical order of
// ops/row_groups.h: per block, s = the exact integer sum of the codes'
// products, acc = fma(float(s), d_w * d_x, acc). Blocks of 34 bytes, packed;
// bytes read out of words. The threads' layout: matmul_common.glsl.
#include "int_dot.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
uint x_word(uint o) {
    const uint s = (o & 3u) * 8u, lo = x[o >> 2];
    return s == 0u ? lo : (lo >> s) | (x[(o >> 2) + 1u] << (32u - s));
}

#ifdef SUBGROUP_ROWS
uint block_words() { return 8u; }  // the 32 codes

ivec2 lane_sums(uint r, uint t, uint b, uint k) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 34u;
    const uint xo = (t * p.x_stride + b) * 34u;
    const uint q = w_word(wo + 2u + 4u * k), v = x_word(xo + 2u + 4u * k);
#ifdef INTEGER_DOT
    return ivec2(dot4_signed(q, v), 0);
#else
    int s = 0;
    for (uint i = 0; i < 4u; ++i) s += signed_byte((q >> (8u * i)) & 0xffu) * signed_byte((v >> (8u * i)) & 0xffu);
    return ivec2(s, 0);
#endif
}

void block_finish(uint r, uint t, uint b, ivec2 sums, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 34u;
    const uint xo = (t * p.x_stride + b) * 34u;
    const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
    precise float dd = dw * dx;
    a = float(sums.x);
    d = dd;
}
#else
void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 34u;
    const uint xo = (t * p.x_stride + b) * 34u;
    int s = 0;
#ifdef INTEGER_DOT
    for (uint i = 0; i < 32u; i += 4u) s += dot4_signed(w_word(wo + 2u + i), x_word(xo + 2u + i));
#else
    for (uint i = 0; i < 32u; ++i) s += signed_byte(w_byte(wo + 2u + i)) * signed_byte(x_byte(xo + 2u + i));
#endif
    const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
    precise float dd = dw * dx;
    a = float(s);
    d = dd;
}
#endif
