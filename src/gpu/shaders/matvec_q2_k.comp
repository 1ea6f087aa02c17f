#version 450
#extension GL_GOOGLE_include_directive : require
// Q2_K weights with Q8_K activations (kquant_types.glsl).
#define KIND KIND_Q2_K
#include "int_dot.glsl"
#include "kquant_types.glsl"
