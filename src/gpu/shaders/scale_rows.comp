#version 450
// x[row][i] *= scale[row] (rows of n, contiguous), each product rounded once:
// a mixture of experts' router weight on an expert's gated activation, as
// SliceForward::gate_rows applies it before the down product's conversion.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer S { float scale[]; };
layout(push_constant) uniform Params { uint n; uint rows; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
    if (i >= p.n || r >= p.rows) return;
    precise float v = x[r * p.n + i] * scale[r];
    x[r * p.n + i] = v;
}
