#version 450
#extension GL_GOOGLE_include_directive : require
// Float rows to Q8_0 blocks as ops/quant_scalar.cpp's q8_0_from_float
// (block_quantize.glsl). The rows are
// contiguous whole blocks, so block k of the buffer is element block k; one
// invocation writes two blocks (68 bytes, 17 whole words: no word is shared
// with another invocation).
#include "block_quantize.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer Q { uint q[]; };
layout(push_constant) uniform Params { uint blocks; } p;  // blocks of the whole buffer

uint bytes_[68];

void quantize(uint k, uint at) {
    float v[32];
    for (uint i = 0; i < 32u; ++i) v[i] = x[32u * k + i];
    int c[32];
    const uint h = q8_0_block(v, c);
    bytes_[at] = h & 0xffu;
    bytes_[at + 1u] = h >> 8;
    for (uint i = 0; i < 32u; ++i) bytes_[at + 2u + i] = uint(c[i]) & 0xffu;
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
