#version 450
// The device's own fma on the probe's triples (gpu/fma_probe.h): whether it
// rounds once, as the CPU's std::fma, decides whether the kernels may use it.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float v[]; };  // a, b, c per case
layout(std430, set = 0, binding = 1) writeonly buffer Out { float r[]; };
layout(push_constant) uniform Params { uint n; } p;

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    precise float f = fma(v[3u * i], v[3u * i + 1u], v[3u * i + 2u]);
    r[i] = f;
}
