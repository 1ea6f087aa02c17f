#version 450
// RoPE as ops/rope.cpp's RopeTable::apply, with the CPU's own cos/sin tables
// of each row's position (row t's at t * pairs): pair i of each head,
// adjacent (2i, 2i + 1) or halves (i, i + n_rot / 2), becomes (a cos - b sin,
// a sin + b cos), each product and difference rounded once (`precise`: no
// fused multiply-add the CPU does not do). Invocation x: a pair of a head;
// y: the row.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Cos { float cos_[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sin { float sin_[]; };
layout(push_constant) uniform Params {
    uint heads; uint head_dim; uint pairs; uint halves; uint tokens; uint stride;
} p;

void main() {
    const uint g = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (g >= p.heads * p.pairs || t >= p.tokens) return;
    const uint h = g / p.pairs, i = g % p.pairs;
    const uint first = t * p.stride + h * p.head_dim + (p.halves != 0u ? i : 2u * i);
    const uint second = first + (p.halves != 0u ? p.pairs : 1u);
    const float c = cos_[t * p.pairs + i], s = sin_[t * p.pairs + i];
    const float a0 = x[first], b0 = x[second];
    precise float ac = a0 * c;
    precise float bs = b0 * s;
    precise float as_ = a0 * s;
    precise float bc = b0 * c;
    precise float a = ac - bs;
    precise float b = as_ + bc;
    x[first] = a;
    x[second] = b;
}
