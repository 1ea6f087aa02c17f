#version 450
// x[i] += y[i] for n values, each sum rounded once (a post-normed output
// joining the residual, as the CPU's add_output).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    precise float v = x[i] + y[i];
    x[i] = v;
}
