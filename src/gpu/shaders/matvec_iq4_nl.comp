#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_NL weights with Q8_0 activations (block32_types.glsl).
#define KIND KIND_IQ4_NL
#include "int_dot.glsl"
#include "block32_types.glsl"
