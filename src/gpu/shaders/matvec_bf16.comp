#version 450
#extension GL_GOOGLE_include_directive : require
// Products of BF16 weights and float activations in the canonical float order
// (ops/float_canonical.h), each bfloat16 widened exactly; the threads' layout: matmul_common.glsl.
#define FLOAT_ROWS
#include "subgroup_tree.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };

float element(uint r, uint i) {
    const uint at = r * p.row_blocks + p.col_begin + i;
    return uintBitsToFloat(((w[at >> 1] >> ((at & 1u) * 16u)) & 0xffffu) << 16);
}
float activation(uint t, uint i) { return x[t * p.x_stride + i]; }
