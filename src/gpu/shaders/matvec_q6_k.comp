#version 450
#extension GL_GOOGLE_include_directive : require
// Products of Q6_K weights and Q8_K activations in the canonical
// order (ops/kquant_scalar.cpp's q6_k_block_step): per block, s = the exact
// integer sum over its 16 sub-blocks of scale_j * ((q - 32) . y)_j, acc =
// fma(d_x, d * float(s), acc) rounded once. Q6_K blocks are 210 bytes
// (ql 128, qh 64, scales 16, d), read out of words; Q8_K 292.
#include "int_dot.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }

// The 6-bit code of element i (ops/kquant_blocks.h's q6_k_code).
int code(uint wo, uint i) {
    const uint h = i / 128u, k = (i % 128u) / 32u, l = i % 32u;
    const uint ql = w_byte(wo + 64u * h + 32u * (k % 2u) + l);
    const uint qh = w_byte(wo + 128u + 32u * h + l);
    const uint low = k < 2u ? (ql & 15u) : (ql >> 4);
    return int(low | (((qh >> (2u * k)) & 3u) << 4));
}

#ifdef INTEGER_DOT
// The codes of elements i..i+3 (i a multiple of 4), one per byte.
uint codes4(uint wo, uint i) {
    const uint h = i / 128u, k = (i % 128u) / 32u, l = i % 32u;
    const uint ql = w_word(wo + 64u * h + 32u * (k % 2u) + l);
    const uint qh = w_word(wo + 128u + 32u * h + l);
    const uint low = (k < 2u ? ql : (ql >> 4)) & 0x0f0f0f0fu;
    return low | (((qh >> (2u * k)) & 0x03030303u) << 4);
}
#endif

#ifdef SUBGROUP_ROWS
#ifndef INTEGER_DOT
// The codes of elements i..i+3 (i a multiple of 4), one per byte.
uint codes4(uint wo, uint i) {
    uint c = 0u;
    for (uint l = 0; l < 4u; ++l) c |= uint(code(wo, i + l)) << (8u * l);
    return c;
}
#endif

uint block_words() { return 64u; }  // 4 codes a word: word k is elements 4k..4k+3, of sub-block k / 4

// x: word k's products, (code - 32) . y, times its sub-block's scale.
ivec2 lane_sums(uint r, uint t, uint b, uint k) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 210u;
    const uint xo = (t * p.x_stride + b) * 292u;
    const uint y4 = x[(xo >> 2) + 1u + k], c4 = codes4(wo, 4u * k);
#ifdef INTEGER_DOT
    const int sub = dot4_mixed(y4, c4) - 32 * dot4_signed(y4, 0x01010101u);
#else
    int sub = 0;
    for (uint i = 0; i < 4u; ++i) sub += (int((c4 >> (8u * i)) & 0xffu) - 32) * signed_byte((y4 >> (8u * i)) & 0xffu);
#endif
    return ivec2(signed_byte(w_byte(wo + 192u + k / 4u)) * sub, 0);
}

void block_finish(uint r, uint t, uint b, ivec2 sums, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 210u;
    const uint xo = (t * p.x_stride + b) * 292u;
    const float scale = unpackHalf2x16(w_byte(wo + 208u) | (w_byte(wo + 209u) << 8)).x;
    precise float ds = scale * float(sums.x);
    a = uintBitsToFloat(x[xo >> 2]);
    d = ds;
}
#else
void block_term(uint r, uint t, uint b, out float a, out float d) {
    {
        const uint wo = (r * p.row_blocks + p.col_begin + b) * 210u;
        const uint xo = (t * p.x_stride + b) * 292u;
        int s = 0;
        for (uint j = 0; j < 16u; ++j) {
            int sub = 0;
#ifdef INTEGER_DOT
            // sum (code - 32) y = sum code y - 32 sum y, the codes unsigned bytes.
            int sum_y = 0;
            for (uint l = 0; l < 16u; l += 4u) {
                const uint y4 = x[(xo + 4u + 16u * j + l) >> 2];
                sub += dot4_mixed(y4, codes4(wo, 16u * j + l));
                sum_y += dot4_signed(y4, 0x01010101u);
            }
            sub -= 32 * sum_y;
#else
            for (uint l = 0; l < 16u; ++l) {
                const uint i = 16u * j + l;
                sub += (code(wo, i) - 32) * signed_byte(x_byte(xo + 4u + i));
            }
#endif
            s += signed_byte(w_byte(wo + 192u + j)) * sub;
        }
        const float scale = unpackHalf2x16(w_byte(wo + 208u) | (w_byte(wo + 209u) << 8)).x;
        const float dx = uintBitsToFloat(x[xo >> 2]);
        precise float ds = scale * float(s);
        a = dx;
        d = ds;
    }
}
#endif
