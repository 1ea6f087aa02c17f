#version 450
#extension GL_GOOGLE_include_directive : require
// Products of Q4_K weights and Q8_K activations in the canonical
// order of ops/row_groups.h: per 256-element block in order, over its 8
// sub-blocks j the exact integers scaled = sum sc_j (q . y)_j and mins =
// sum m_j sum(y)_j (two of Q8_K's bsums each); block = fma(-dmin,
// float(mins), d * float(scaled)), acc = fma(d_x, block, acc), each fma
// rounded once. Indexing: matmul_common.glsl. Q4_K blocks are 144 bytes, Q8_K 292 (both whole words).
#include "int_dot.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

uint x_byte(uint o) { return (x[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int x_int16(uint o) { return int((x_byte(o) | (x_byte(o + 1u) << 8)) << 16) >> 16; }

#ifdef SUBGROUP_ROWS
uint block_words() { return 32u; }  // the 128 bytes of nibbles: word k holds sub-blocks 2(k / 8) (low) and 2(k / 8) + 1 (high)

// Sub-block j's scale (x) and min (y) from the 12 packed bytes at so.
uvec2 scale_min(uint so, uint j) {
    if (j < 4u) return uvec2(w_byte(so + j) & 63u, w_byte(so + j + 4u) & 63u);
    return uvec2((w_byte(so + j + 4u) & 15u) | ((w_byte(so + j - 4u) >> 6) << 4),
                 (w_byte(so + j + 4u) >> 4) | ((w_byte(so + j) >> 6) << 4));
}

// x: the scaled products of word k; y: for k < 8, sub-block k's min times its activations' sum.
ivec2 lane_sums(uint r, uint t, uint b, uint k) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 144u;
    const uint xo = (t * p.x_stride + b) * 292u;
    const uint c = k / 8u, pos = k % 8u;
    const uint q = w[(wo >> 2) + 4u + k];
    const uint xl = x[(xo >> 2) + 1u + 16u * c + pos], xh = x[(xo >> 2) + 9u + 16u * c + pos];
#ifdef INTEGER_DOT
    const int lo = dot4_mixed(xl, q & 0x0f0f0f0fu), hi = dot4_mixed(xh, (q >> 4) & 0x0f0f0f0fu);
#else
    int lo = 0, hi = 0;
    for (uint i = 0; i < 4u; ++i) {
        lo += int((q >> (8u * i)) & 15u) * signed_byte((xl >> (8u * i)) & 0xffu);
        hi += int((q >> (8u * i + 4u)) & 15u) * signed_byte((xh >> (8u * i)) & 0xffu);
    }
#endif
    int mins = 0;
    if (k < 8u) {
        const uint bsums = x[(xo >> 2) + 65u + k];  // Q8_K's sums of sub-block k's halves, two int16
        mins = int(scale_min(wo + 4u, k).y) * ((int(bsums << 16) >> 16) + (int(bsums) >> 16));
    }
    return ivec2(int(scale_min(wo + 4u, 2u * c).x) * lo + int(scale_min(wo + 4u, 2u * c + 1u).x) * hi, mins);
}

void block_finish(uint r, uint t, uint b, ivec2 sums, out float a, out float d) {
    const uint wo = (r * p.row_blocks + p.col_begin + b) * 144u;
    const uint xo = (t * p.x_stride + b) * 292u;
    const vec2 scale_dmin = unpackHalf2x16(w[wo >> 2]);
    precise float ds = scale_dmin.x * float(sums.x);
    a = uintBitsToFloat(x[xo >> 2]);
    d = exact_fma(-scale_dmin.y, float(sums.y), ds);
}
#else
void block_term(uint r, uint t, uint b, out float a, out float d) {
    {
        const uint wo = (r * p.row_blocks + p.col_begin + b) * 144u;
        const uint xo = (t * p.x_stride + b) * 292u;
        const uint so = wo + 4u;  // the 12 bytes of packed scales and mins
        int scaled = 0;
        int mins = 0;
        for (uint j = 0; j < 8u; ++j) {
            uint sc, m;
            if (j < 4u) {
                sc = w_byte(so + j) & 63u;
                m = w_byte(so + j + 4u) & 63u;
            } else {
                sc = (w_byte(so + j + 4u) & 15u) | ((w_byte(so + j - 4u) >> 6) << 4);
                m = (w_byte(so + j + 4u) >> 4) | ((w_byte(so + j) >> 6) << 4);
            }
            const uint q = wo + 16u + 32u * (j / 2u);
            const uint shift = (j % 2u) * 4u;
            int isum = 0;
#ifdef INTEGER_DOT
            for (uint l = 0; l < 32u; l += 4u) {
                isum += dot4_mixed(x[(xo + 4u + 32u * j + l) >> 2], (w[(q + l) >> 2] >> shift) & 0x0f0f0f0fu);
            }
#else
            for (uint l = 0; l < 32u; ++l) {
                isum += int((w_byte(q + l) >> shift) & 15u) * signed_byte(x_byte(xo + 4u + 32u * j + l));
            }
#endif
            scaled += int(sc) * isum;
            mins += int(m) * (x_int16(xo + 260u + 4u * j) + x_int16(xo + 262u + 4u * j));
        }
        const float scale = unpackHalf2x16(w_byte(wo) | (w_byte(wo + 1u) << 8)).x;
        const float dmin = unpackHalf2x16(w_byte(wo + 2u) | (w_byte(wo + 3u) << 8)).x;
        const float dx = uintBitsToFloat(x[xo >> 2]);
        precise float ds = scale * float(scaled);
        a = dx;
        d = exact_fma(-dmin, float(mins), ds);
    }
}
#endif
