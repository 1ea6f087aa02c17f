#version 450
// y[t][i] += bias[i] for `tokens` rows of n (row stride `stride`), each sum
// rounded once (a family's Q/K/V biases).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Y { float y[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float bias[]; };
layout(push_constant) uniform Params { uint n; uint tokens; uint stride; uint bias_begin; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (i >= p.n || t >= p.tokens) return;
    precise float v = y[t * p.stride + i] + bias[p.bias_begin + i];
    y[t * p.stride + i] = v;
}
