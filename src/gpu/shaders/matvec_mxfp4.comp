#version 450
#extension GL_GOOGLE_include_directive : require
// MXFP4 weights with Q8_0 activations (block32_types.glsl).
#define KIND KIND_MXFP4
#include "int_dot.glsl"
#include "block32_types.glsl"
