// Products of the other 256-element types with Q8_K activations (float d,
// 256 codes, 16 sums of 16), each block in the canonical order of
// ops/kquant_low_scalar.cpp and iq4_scalar.cpp (ops/row_groups.h):
//   Q5_K (176 bytes), Q2_K (84): scaled = sum_j sc_j (q . y)_j and mins =
//     sum_j m_j sum(y)_j (exact), block = fma(-dmin, float(mins), d *
//     float(scaled)), acc = fma(d_x, block, acc)
//   Q3_K (110), IQ4_XS (136): s = sum_j (s_j - 32) (v . y)_j (exact),
//     acc = fma(d_x, d * float(s), acc)
#define KIND_Q5_K 1
#define KIND_Q3_K 2
#define KIND_Q2_K 3
#define KIND_IQ4_XS 4
// (Each shader includes int_dot.glsl first: its integer-dot build.)
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int x_code(uint xo, uint i) { return signed_byte(x_byte(xo + 4u + i)); }
int x_sum16(uint xo, uint j) { return int((x_byte(xo + 260u + 2u * j) | (x_byte(xo + 261u + 2u * j) << 8)) << 16) >> 16; }
float w_half(uint o) { return unpackHalf2x16(w_byte(o) | (w_byte(o + 1u) << 8)).x; }

#if KIND == KIND_Q5_K
const uint kBytes = 176u;
// q4_k_scale_min over the 12 bytes at so.
void scale_min(uint so, uint j, out int sc, out int m) {
    if (j < 4u) {
        sc = int(w_byte(so + j) & 63u);
        m = int(w_byte(so + j + 4u) & 63u);
    } else {
        sc = int((w_byte(so + j + 4u) & 15u) | ((w_byte(so + j - 4u) >> 6) << 4));
        m = int((w_byte(so + j + 4u) >> 4) | ((w_byte(so + j) >> 6) << 4));
    }
}
int code(uint wo, uint i) {
    const uint g = i / 64u, half_ = (i % 64u) / 32u, l = i % 32u;
    const uint low = (w_byte(wo + 48u + 32u * g + l) >> (4u * half_)) & 15u;
    return int(low | (((w_byte(wo + 16u + l) >> (2u * g + half_)) & 1u) << 4));
}
#elif KIND == KIND_Q3_K || KIND == KIND_Q2_K
#if KIND == KIND_Q3_K
const uint kBytes = 110u, kQs = 32u;
#else
const uint kBytes = 84u, kQs = 16u;
#endif
int low2(uint wo, uint i) {
    const uint h = i / 128u, k = (i % 128u) / 32u, l = i % 32u;
    return int((w_byte(wo + kQs + 32u * h + l) >> (2u * k)) & 3u);
}
#if KIND == KIND_Q3_K
int code(uint wo, uint i) { return low2(wo, i) - (((w_byte(wo + i % 32u) >> (i / 32u)) & 1u) != 0u ? 0 : 4); }
int sub_scale(uint wo, uint j) {
    const uint so = wo + 96u;
    const uint low = j < 8u ? (w_byte(so + j) & 15u) : (w_byte(so + j - 8u) >> 4);
    const uint high = (w_byte(so + 8u + j % 4u) >> (2u * (j / 4u))) & 3u;
    return int(low | (high << 4)) - 32;
}
#endif
#else
const uint kBytes = 136u;
const int kValues[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
int code(uint wo, uint i) {
    const uint j = i / 32u, k = i % 32u;
    const uint b = w_byte(wo + 8u + 16u * j + k % 16u);
    return kValues[k < 16u ? (b & 15u) : (b >> 4)];
}
int sub_scale(uint wo, uint j) {
    const uint sl = (w_byte(wo + 4u + j / 2u) >> (4u * (j % 2u))) & 15u;
    const uint sh = ((w_byte(wo + 2u) | (w_byte(wo + 3u) << 8)) >> (2u * j)) & 3u;
    return int(sl | (sh << 4)) - 32;
}
#endif

#ifdef INTEGER_DOT
// sum over l < width of code(base + l) * y(base + l) (Q2_K: its 2-bit low
// codes), base and width multiples of 4: whole words of activations.
#if KIND == KIND_Q2_K
#define DOT_CODE low2
#else
#define DOT_CODE code
#endif
int dot_codes(uint wo, uint xo, uint base, uint width) {
    int s = 0;
    for (uint q = base; q < base + width; q += 4u) {
        const uint codes = pack4(DOT_CODE(wo, q), DOT_CODE(wo, q + 1u), DOT_CODE(wo, q + 2u), DOT_CODE(wo, q + 3u));
        s += dot4_signed(codes, x[(xo + 4u + q) >> 2]);
    }
    return s;
}
#endif

void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * kBytes;
    const uint xo = (t * p.x_stride + b) * 292u;
    a = uintBitsToFloat(x[xo >> 2]);  // d_x: every type's step is fma(d_x, block, acc)
#if KIND == KIND_Q5_K
    int scaled = 0, mins = 0;
    for (uint j = 0; j < 8u; ++j) {
        int sc, m;
        scale_min(wo + 4u, j, sc, m);
#ifdef INTEGER_DOT
        const int s = dot_codes(wo, xo, 32u * j, 32u);
#else
        int s = 0;
        for (uint l = 0; l < 32u; ++l) s += code(wo, 32u * j + l) * x_code(xo, 32u * j + l);
#endif
        scaled += sc * s;
        mins += m * (x_sum16(xo, 2u * j) + x_sum16(xo, 2u * j + 1u));
    }
    precise float ds = w_half(wo) * float(scaled);
    d = exact_fma(-w_half(wo + 2u), float(mins), ds);
#elif KIND == KIND_Q2_K
    int scaled = 0, mins = 0;
    for (uint j = 0; j < 16u; ++j) {
#ifdef INTEGER_DOT
        const int s = dot_codes(wo, xo, 16u * j, 16u);
#else
        int s = 0;
        for (uint l = 0; l < 16u; ++l) s += low2(wo, 16u * j + l) * x_code(xo, 16u * j + l);
#endif
        const uint sc = w_byte(wo + j);
        scaled += int(sc & 15u) * s;
        mins += int(sc >> 4) * x_sum16(xo, j);
    }
    precise float ds = w_half(wo + 80u) * float(scaled);
    d = exact_fma(-w_half(wo + 82u), float(mins), ds);
#else
#if KIND == KIND_Q3_K
    const uint subs = 16u, width = 16u;
    const float scale = w_half(wo + 108u);
#else
    const uint subs = 8u, width = 32u;
    const float scale = w_half(wo);
#endif
    int total = 0;
    for (uint j = 0; j < subs; ++j) {
#ifdef INTEGER_DOT
        const int s = dot_codes(wo, xo, width * j, width);
#else
        int s = 0;
        for (uint l = 0; l < width; ++l) s += code(wo, width * j + l) * x_code(xo, width * j + l);
#endif
        total += sub_scale(wo, j) * s;
    }
    precise float ds = scale * float(total);
    d = ds;
#endif
}
