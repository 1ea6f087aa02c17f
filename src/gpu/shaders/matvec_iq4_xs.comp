#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_XS weights with Q8_K activations (kquant_types.glsl).
#define KIND KIND_IQ4_XS
#include "int_dot.glsl"
#include "kquant_types.glsl"
