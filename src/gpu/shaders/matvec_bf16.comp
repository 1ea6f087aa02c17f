#version 450
#extension GL_GOOGLE_include_directive : require
// Products of BF16 weights and BF16 activations in the canonical pairs order
// (ops/float_canonical.h's bf16_pairs_dot_canonical): the activations arrive
// as floats and each is rounded to BF16 here as the CPU's activation
// conversion rounds it (nearest even, NaNs kept quiet); the threads' layout:
// matmul_common.glsl.
#define FLOAT_ROWS
#define BF16_PAIRS
#include "subgroup_tree.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };

float element(uint r, uint i) {
    const uint at = r * p.row_blocks + p.col_begin + i;
    return uintBitsToFloat(((w[at >> 1] >> ((at & 1u) * 16u)) & 0xffffu) << 16);
}
float activation(uint t, uint i) {
    const uint bits = floatBitsToUint(x[t * p.x_stride + i]);
    const uint high = (bits & 0x7fffffffu) > 0x7f800000u ? (bits >> 16) | 64u : (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    return uintBitsToFloat((high & 0xffffu) << 16);
}
