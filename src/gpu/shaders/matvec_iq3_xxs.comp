#version 450
#extension GL_GOOGLE_include_directive : require
// IQ3_XXS weights with Q8_K activations (iq_grid_types.glsl).
#define KIND KIND_IQ3_XXS
#include "int_dot.glsl"
#include "iq_grid_types.glsl"
