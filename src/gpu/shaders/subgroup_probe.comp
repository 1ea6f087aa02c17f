#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
// What the subgroup-per-row products (matmul_common.glsl's SUBGROUP_ROWS)
// assume of a device's subgroups, invocation by invocation
// (gpu/subgroup_probe.h checks it): its size, lane, subgroup and count of
// subgroups, a shuffle by xor with each distance the lanes' sums use, and a
// shuffle from each lane a chain reads.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Params { uint stride; } p;  // words per invocation

void main() {
    const uint i = gl_GlobalInvocationID.x, size = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    const uint base = i * p.stride;
    o[base + 0u] = size;
    o[base + 1u] = lane;
    o[base + 2u] = gl_SubgroupID;
    o[base + 3u] = gl_NumSubgroups;
    // The lane's global id, as each partner sees it.
    uint k = 4u;
    for (uint d = 1u; d < 64u; d *= 2u) {
        o[base + k] = d < size ? subgroupShuffleXor(i, d) : 0xffffffffu;
        ++k;
    }
    for (uint src = 0u; src < 64u; ++src) {
        o[base + k] = src < size ? subgroupShuffle(i, src) : 0xffffffffu;
        ++k;
    }
}
