// Products of the grid I-quants with Q8_K activations, each block in the
// canonical order of ops/iq_grid_scalar.cpp: per 32-weight sub-block j and
// group l of 8, the exact integer sum of sign * point byte * y, times the
// group's odd scale 2 s + 1 (ops/iq_grid_decode.h's fields, read the same
// way); then acc = fma(d_x, d_w * (k * float(S)), acc), k = 1/8 (IQ2), 1/4
// (IQ3_XXS) or 1 (IQ3_S). The grids and sign masks come in a buffer of
// words (binding 3): the points (IQ2: two words each, IQ3: one), then the
// 256 sign-byte masks and the 128 seven-bit masks (two words each).
#define KIND_IQ2_XXS 1
#define KIND_IQ2_XS 2
#define KIND_IQ2_S 3
#define KIND_IQ3_XXS 4
#define KIND_IQ3_S 5
// (Each shader includes int_dot.glsl first: its integer-dot build.)
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 3) readonly buffer Grid { uint grid[]; };

#if KIND == KIND_IQ2_XXS
const uint kBytes = 66u, kPointWords = 256u * 2u;
const float kStep = 0.125;
#elif KIND == KIND_IQ2_XS
const uint kBytes = 74u, kPointWords = 512u * 2u;
const float kStep = 0.125;
#elif KIND == KIND_IQ2_S
const uint kBytes = 82u, kPointWords = 1024u * 2u;
const float kStep = 0.125;
#elif KIND == KIND_IQ3_XXS
const uint kBytes = 98u, kPointWords = 256u;
const float kStep = 0.25;
#else
const uint kBytes = 110u, kPointWords = 512u;
const float kStep = 1.0;
#endif

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int x_code(uint xo, uint i) { return signed_byte(x_byte(xo + 4u + i)); }
uint w_u16(uint o) { return w_byte(o) | (w_byte(o + 1u) << 8); }
uint w_u32(uint o) { return w_u16(o) | (w_u16(o + 2u) << 16); }
float w_half(uint o) { return unpackHalf2x16(w_u16(o)).x; }

// Point p's 8 bytes (two words): IQ2's from the table, IQ3's a pair of 4.
uvec2 point2(uint p) { return uvec2(grid[2u * p], grid[2u * p + 1u]); }
uvec2 point3(uint p0, uint p1) { return uvec2(grid[p0], grid[p1]); }
uvec2 sign_mask(uint byte_) { return uvec2(grid[kPointWords + 2u * byte_], grid[kPointWords + 2u * byte_ + 1u]); }
uvec2 sign7_mask(uint bits) { return uvec2(grid[kPointWords + 512u + 2u * bits], grid[kPointWords + 513u + 2u * bits]); }
int odd(uint s) { return 2 * int(s) + 1; }

// sum over the group's 8 weights of sign * point byte * y.
int group_sum(uvec2 points, uvec2 signs, uint xo, uint first) {
    int part = 0;
#ifdef INTEGER_DOT
    // sum v y - 2 sum over the negated bytes of v y (the points' bytes are
    // unsigned; first is a multiple of 8, so the activations' words are whole).
    for (uint w = 0; w < 2u; ++w) {
        const uint y = x[(xo + 4u + first + 4u * w) >> 2];
        const uint minus = (signs[w] & 0x01010101u) * 0xffu;
        part += dot4_mixed(y, points[w]) - 2 * dot4_mixed(y, points[w] & minus);
    }
#else
    for (uint i = 0; i < 8u; ++i) {
        const uint word = i / 4u, shift = 8u * (i % 4u);
        const int v = int((points[word] >> shift) & 0xffu);
        const bool minus = ((signs[word] >> shift) & 1u) != 0u;
        part += (minus ? -v : v) * x_code(xo, first + i);
    }
#endif
    return part;
}

void block_term(uint r, uint t, uint b, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * kBytes;
    const uint xo = (t * p.x_stride + b) * 292u;
    int total = 0;
    for (uint j = 0; j < 8u; ++j) {
        int scale_lo, scale_hi;
        uvec2 points[4], signs[4];
#if KIND == KIND_IQ2_XXS
        const uint q = wo + 2u + 8u * j;
        const uint bits = w_u32(q + 4u);
        for (uint l = 0; l < 4u; ++l) {
            points[l] = point2(w_byte(q + l));
            signs[l] = sign7_mask((bits >> (7u * l)) & 127u);
        }
        scale_lo = scale_hi = odd(bits >> 28);
#elif KIND == KIND_IQ2_XS
        const uint q = wo + 2u + 8u * j;
        for (uint l = 0; l < 4u; ++l) {
            const uint v = w_u16(q + 2u * l);
            points[l] = point2(v & 511u);
            signs[l] = sign7_mask(v >> 9);
        }
        const uint sc = w_byte(wo + 66u + j);
        scale_lo = odd(sc & 15u);
        scale_hi = odd(sc >> 4);
#elif KIND == KIND_IQ2_S
        const uint qh = w_byte(wo + 66u + j);
        for (uint l = 0; l < 4u; ++l) {
            points[l] = point2(w_byte(wo + 2u + 4u * j + l) | ((qh << (8u - 2u * l)) & 0x300u));
            signs[l] = sign_mask(w_byte(wo + 2u + 32u + 4u * j + l));
        }
        const uint sc = w_byte(wo + 74u + j);
        scale_lo = odd(sc & 15u);
        scale_hi = odd(sc >> 4);
#elif KIND == KIND_IQ3_XXS
        const uint q = wo + 2u + 8u * j;
        const uint bits = w_u32(wo + 2u + 64u + 4u * j);
        for (uint l = 0; l < 4u; ++l) {
            points[l] = point3(w_byte(q + 2u * l), w_byte(q + 2u * l + 1u));
            signs[l] = sign7_mask((bits >> (7u * l)) & 127u);
        }
        scale_lo = scale_hi = odd(bits >> 28);
#else
        const uint q = wo + 2u + 8u * j;
        const uint qh = w_byte(wo + 66u + j);
        for (uint l = 0; l < 4u; ++l) {
            points[l] = point3(w_byte(q + 2u * l) | ((qh << (8u - 2u * l)) & 256u),
                               w_byte(q + 2u * l + 1u) | ((qh << (7u - 2u * l)) & 256u));
            signs[l] = sign_mask(w_byte(wo + 74u + 4u * j + l));
        }
        scale_lo = scale_hi = odd((w_byte(wo + 106u + j / 2u) >> (4u * (j % 2u))) & 15u);
#endif
        for (uint l = 0; l < 4u; ++l) total += (l < 2u ? scale_lo : scale_hi) * group_sum(points[l], signs[l], xo, 32u * j + 8u * l);
    }
    a = uintBitsToFloat(x[xo >> 2]);  // d_x
    precise float ks = kStep * float(total);
    precise float dks = w_half(wo) * ks;
    d = dks;
}
