#version 450
// y[pair][i] += bias[expert[pair] * n + i]: each chosen expert's gate or up
// bias (gpt-oss) on its row of the pairs (token, expert), each sum rounded
// once, as SliceForward's add_gate_up_bias.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Y { float y[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float bias[]; };
layout(std430, set = 0, binding = 2) readonly buffer E { uint expert[]; };
layout(push_constant) uniform Params { uint n; uint pairs; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x, j = gl_GlobalInvocationID.y;
    if (i >= p.n || j >= p.pairs) return;
    precise float v = y[j * p.n + i] + bias[expert[j] * p.n + i];
    y[j * p.n + i] = v;
}
