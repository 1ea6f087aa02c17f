#version 450
#extension GL_GOOGLE_include_directive : require
// partial[t][r] = the sum of row r's unit dots, each snapped to the 2^-32
// grid (clamped to +-2^16) in double (ops/fixed_sum.h): a tensor-parallel
// rank's exact partial, as SliceForward's matmul_units gives it.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Dots { float dots[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Partial { double partial[]; };
layout(push_constant) uniform Params { uint rows; uint units; uint tokens; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (r >= p.rows || t >= p.tokens) return;
    precise double sum = 0.0;
    for (uint u = 0; u < p.units; ++u) {
        double d = double(dots[(t * p.rows + r) * p.units + u]);
        d = d < -65536.0 ? -65536.0 : d;
        d = d > 65536.0 ? 65536.0 : d;
        precise double snapped = (d + 1572864.0) - 1572864.0;
        sum = sum + snapped;
    }
    partial[t * p.rows + r] = sum;
}
