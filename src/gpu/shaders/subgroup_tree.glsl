// The float products' 16-lane tree by subgroup shuffles instead of shared
// memory and barriers (matmul_common.glsl, workgroup layout). Built twice by
// CMake: with SUBGROUP_TREE it brings GL_KHR_shader_subgroup_shuffle (a
// module declaring it would not load on a device without shuffles, hence
// the plain build beside it). Lane j adds lane j ^ s for s = 8, 4, 2, 1: for
// j < s that is l[j] + l[j + s], the CPU's step, and lanes above s hold the
// same sums (addition commutes), so lane 0 ends with the canonical tree's
// bits. Include it before any declaration: it brings an #extension.
#ifdef SUBGROUP_TREE
#extension GL_KHR_shader_subgroup_shuffle : require
float lane_tree(float v) {
    precise float s = v;
    for (uint d = 8u; d >= 1u; d /= 2u) {
        const float other = subgroupShuffleXor(s, d);
        s = s + other;
    }
    return s;
}
// The tree needs a dot's 16 lanes inside one subgroup: sizes 16, 32 and 64
// (a compiler may pick a narrower one than the device reports, so the shader
// asks at run time and keeps the shared-memory tree otherwise).
bool subgroups_hold_lanes() { return gl_SubgroupSize >= 16u && 64u % gl_SubgroupSize == 0u; }
#endif
