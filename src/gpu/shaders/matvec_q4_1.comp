#version 450
#extension GL_GOOGLE_include_directive : require
// Q4_1 weights with Q8_0 activations (block32_types.glsl).
#define KIND KIND_Q4_1
#include "int_dot.glsl"
#include "block32_types.glsl"
