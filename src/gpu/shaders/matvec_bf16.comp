#version 450
#extension GL_GOOGLE_include_directive : require
// Products of BF16 weights and float activations in the canonical float
// order (as matvec_f32.comp, each bfloat16 widened exactly first). Indexing:
// matmul_common.glsl.
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };

float w_bf16(uint i) { return uintBitsToFloat(((w[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu) << 16); }

float unit_dot(uint r, uint t, uint first, uint count) {
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    const uint wbase = r * p.row_blocks + p.col_begin + first;
    const uint xbase = t * p.x_stride + first;
    for (uint i = 0; i < count; ++i) lanes[i % 16] = exact_fma(w_bf16(wbase + i), x[xbase + i], lanes[i % 16]);
    for (uint i = count; i % 16 != 0; ++i) lanes[i % 16] = exact_fma(0.0, 0.0, lanes[i % 16]);
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
    }
    return lanes[0];
}
