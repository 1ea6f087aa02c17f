#version 450
#extension GL_GOOGLE_include_directive : require
// Products of Q4_0 weights and Q8_0 activations in the canonical order of
// ops/row_groups.h: per block, s = the exact integer sum of (q - 8) * x
// (element i < 16 the low nibble of byte i, i + 16 its high nibble), acc =
// fma(float(s), d_w * d_x, acc). Blocks: Q4_0 18 bytes, Q8_0 34, packed. The
// threads' layout: matmul_common.glsl.
#include "int_dot.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
uint x_word(uint o) {
    const uint s = (o & 3u) * 8u, lo = x[o >> 2];
    return s == 0u ? lo : (lo >> s) | (x[(o >> 2) + 1u] << (32u - s));
}

#ifdef SUBGROUP_ROWS
uint block_words() { return 4u; }  // the 16 bytes of nibbles

// x: sum q x over word k's eight codes (nibbles unsigned), y: the sum of their activations.
ivec2 lane_sums(uint r, uint t, uint b, uint k) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 18u;
    const uint xo = (t * p.x_stride + b) * 34u;
    const uint q = w_word(wo + 2u + 4u * k);
    const uint lo = x_word(xo + 2u + 4u * k), hi = x_word(xo + 18u + 4u * k);
#ifdef INTEGER_DOT
    return ivec2(dot4_mixed(lo, q & 0x0f0f0f0fu) + dot4_mixed(hi, (q >> 4) & 0x0f0f0f0fu),
                 dot4_signed(lo, 0x01010101u) + dot4_signed(hi, 0x01010101u));
#else
    ivec2 s = ivec2(0);
    for (uint i = 0; i < 4u; ++i) {
        const int xl = signed_byte((lo >> (8u * i)) & 0xffu), xh = signed_byte((hi >> (8u * i)) & 0xffu);
        s.x += int((q >> (8u * i)) & 15u) * xl + int((q >> (8u * i + 4u)) & 15u) * xh;
        s.y += xl + xh;
    }
    return s;
#endif
}

void block_finish(uint r, uint t, uint b, ivec2 sums, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 18u;
    const uint xo = (t * p.x_stride + b) * 34u;
    const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
    precise float dd = dw * dx;
    a = float(sums.x - 8 * sums.y);  // sum (q - 8) x
    d = dd;
}
#else
void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 18u;
    const uint xo = (t * p.x_stride + b) * 34u;
    int s = 0;
#ifdef INTEGER_DOT
    // sum (q - 8) x = sum q x - 8 sum x, the nibbles unsigned bytes.
    int sum_x = 0;
    for (uint i = 0; i < 16u; i += 4u) {
        const uint q = w_word(wo + 2u + i);
        const uint lo = x_word(xo + 2u + i), hi = x_word(xo + 18u + i);
        s += dot4_mixed(lo, q & 0x0f0f0f0fu) + dot4_mixed(hi, (q >> 4) & 0x0f0f0f0fu);
        sum_x += dot4_signed(lo, 0x01010101u) + dot4_signed(hi, 0x01010101u);
    }
    s -= 8 * sum_x;
#else
    for (uint i = 0; i < 16u; ++i) {
        const uint q = w_byte(wo + 2u + i);
        s += (int(q & 15u) - 8) * signed_byte(x_byte(xo + 2u + i));
        s += (int(q >> 4) - 8) * signed_byte(x_byte(xo + 18u + i));
    }
#endif
    const float dw = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
    precise float dd = dw * dx;
    a = float(s);
    d = dd;
}
#endif
