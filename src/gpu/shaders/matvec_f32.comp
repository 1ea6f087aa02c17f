#version 450
#extension GL_GOOGLE_include_directive : require
// Products of F32 weights and float activations in the canonical float order
// (ops/float_canonical.h); the threads' layout: matmul_common.glsl.
#define FLOAT_ROWS
#include "subgroup_tree.glsl"
#include "matmul_common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };

float element(uint r, uint i) {
    const uint at = r * p.row_blocks + p.col_begin + i;
    return uintBitsToFloat(w[at]);
}
float activation(uint t, uint i) { return x[t * p.x_stride + i]; }
