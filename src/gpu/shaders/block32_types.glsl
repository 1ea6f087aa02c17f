// Products of the other 32-element block types with Q8_0 activations, each
// block in the canonical order of ops/block32_scalar.cpp and iq4_scalar.cpp
// (ops/row_groups.h): the exact integer sum s of codes times activations,
// then one rounded fma per block. KIND picks the type:
//   Q4_1 (20 bytes: d, m, 16 nibbles), Q5_1 (24: d, m, qh, 16 nibbles):
//     block = fma(m, float(sum x), d * float(s)), acc = fma(d_x, block, acc)
//   Q5_0 (22: d, qh, nibbles; code - 16), IQ4_NL (18: d, nibbles as indices
//     into kvalues), MXFP4 (17: e8m0 exponent, nibbles into E2M1 values):
//     acc = fma(float(s), d * d_x, acc)
// Nibble i (< 16: low of byte i; else high of byte i - 16), as Q4_0.
#define KIND_Q4_1 1
#define KIND_Q5_0 2
#define KIND_Q5_1 3
#define KIND_IQ4_NL 4
#define KIND_MXFP4 5
// (Each shader includes int_dot.glsl first: its integer-dot build.)
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
uint x_word(uint o) {
    const uint s = (o & 3u) * 8u, lo = x[o >> 2];
    return s == 0u ? lo : (lo >> s) | (x[(o >> 2) + 1u] << (32u - s));
}
float w_half(uint o) { return unpackHalf2x16(w_byte(o) | (w_byte(o + 1u) << 8)).x; }

#if KIND == KIND_Q4_1
const uint kBytes = 20u, kQs = 4u;
#elif KIND == KIND_Q5_0
const uint kBytes = 22u, kQs = 6u, kQh = 2u;
#elif KIND == KIND_Q5_1
const uint kBytes = 24u, kQs = 8u, kQh = 4u;
#elif KIND == KIND_IQ4_NL
const uint kBytes = 18u, kQs = 2u;
const int kValues[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#else
const uint kBytes = 17u, kQs = 1u;
const int kValues[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
#endif

// Element i's code (the signed value the integer sum takes).
int code(uint wo, uint i) {
    const uint b = w_byte(wo + kQs + i % 16u);
    const uint low = i < 16u ? (b & 15u) : (b >> 4);
#if KIND == KIND_Q5_0 || KIND == KIND_Q5_1
    const uint high = (w_byte(wo + kQh + i / 8u) >> (i % 8u)) & 1u;
    const int c = int(low | (high << 4));
#if KIND == KIND_Q5_0
    return c - 16;
#else
    return c;
#endif
#elif KIND == KIND_IQ4_NL || KIND == KIND_MXFP4
    return kValues[low];
#else
    return int(low);
#endif
}

#if KIND == KIND_MXFP4
// ggml's E8M0 scale halved (the E2M1 values are kept doubled).
float e8m0_half(uint e) { return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23)); }
#endif

void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * kBytes;
    const uint xo = (t * p.x_stride + b) * 34u;
    int s = 0, sum_x = 0;
#ifdef INTEGER_DOT
    for (uint i = 0; i < 32u; i += 4u) {
        const uint xw = x_word(xo + 2u + i);
        s += dot4_signed(pack4(code(wo, i), code(wo, i + 1u), code(wo, i + 2u), code(wo, i + 3u)), xw);
        sum_x += dot4_signed(xw, 0x01010101u);
    }
#else
    for (uint i = 0; i < 32u; ++i) {
        const int xi = signed_byte(x_byte(xo + 2u + i));
        s += code(wo, i) * xi;
        sum_x += xi;
    }
#endif
    const float dx = unpackHalf2x16(x_byte(xo) | (x_byte(xo + 1u) << 8)).x;
#if KIND == KIND_Q4_1 || KIND == KIND_Q5_1
    precise float ds = w_half(wo) * float(s);
    a = dx;
    d = exact_fma(w_half(wo + 2u), float(sum_x), ds);
#else
#if KIND == KIND_MXFP4
    precise float dd = e8m0_half(w_byte(wo)) * dx;
#else
    precise float dd = w_half(wo) * dx;
#endif
    a = float(s);
    d = dd;
#endif
}
