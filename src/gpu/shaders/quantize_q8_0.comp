#version 450
#extension GL_GOOGLE_include_directive : require
// Float rows to Q8_0 blocks as ops/quant_scalar.cpp's q8_0_from_float: amax
// = max |x|, d = amax / 127 and id = 1 / d each rounded once, the codes
// round(x * id) half away from zero, d stored as a half. The rows are
// contiguous whole blocks, so block k of the buffer is element block k; one
// invocation writes two blocks (68 bytes, 17 whole words: no word is shared
// with another invocation).
#include "exact_math.glsl"
#include "half.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer Q { uint q[]; };
layout(push_constant) uniform Params { uint blocks; } p;  // blocks of the whole buffer

uint bytes_[68];

void quantize(uint k, uint at) {
    float amax = 0.0;
    for (uint i = 0; i < 32u; ++i) amax = max(amax, abs(x[32u * k + i]));
    const float d = exact_div_f(amax, 127.0);
    const float id = d != 0.0 ? exact_recip_f(d) : 0.0;
    const uint h = f32_to_f16_bits(d);
    bytes_[at] = h & 0xffu;
    bytes_[at + 1u] = h >> 8;
    for (uint i = 0; i < 32u; ++i) {
        precise float v = x[32u * k + i] * id;
        // Half away from zero, exactly (|v| <= 127.x: floor and the
        // difference are exact).
        const float m = abs(v);
        const float f = floor(m);
        precise float frac = m - f;
        const float r = frac >= 0.5 ? f + 1.0 : f;
        const int c = v < 0.0 ? -int(r) : int(r);
        bytes_[at + 2u + i] = uint(c) & 0xffu;
    }
}

void main() {
    const uint pair = gl_GlobalInvocationID.x;
    if (2u * pair >= p.blocks) return;
    quantize(2u * pair, 0u);
    const bool second = 2u * pair + 1u < p.blocks;
    if (second) quantize(2u * pair + 1u, 34u);
    const uint words = second ? 17u : 9u;  // a lone last block shares no word with a neighbour
    for (uint j = 0; j < words; ++j) {
        uint v = 0u;
        for (uint b = 0; b < 4u; ++b) {
            const uint o = 4u * j + b;
            if (second || o < 34u) v |= bytes_[o] << (8u * b);
        }
        if (!second && j == 8u) {
            // Bytes 34 and 35 of the pair's last word lie past the buffer's
            // last block: keep what is there (padding).
            v = (v & 0xffffu) | (q[17u * pair + j] & 0xffff0000u);
        }
        q[17u * pair + j] = v;
    }
}
