// Whether a Vulkan device's subgroups are what the subgroup-per-row products
// (shaders/matmul_common.glsl's SUBGROUP_ROWS) assume: a 64-invocation
// workgroup cut into 64 / gl_SubgroupSize subgroups of consecutive
// invocations, and shuffles (by xor, by index) that read the lane they name.
// Drivers need not agree with what they report: lavapipe at 1024-bit vectors
// reports subgroups of 32 and runs 4 of them in a workgroup of 64. One
// dispatch of shaders/subgroup_probe.comp decides, once per context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class VulkanContext;

// The probe's words per invocation and its verdict on them: empty when the
// subgroups are as assumed, else what differs (for an error message).
constexpr uint32_t kSubgroupProbeWords = 4 + 6 + 64;
std::string subgroup_probe_mismatch(const std::vector<uint32_t>& words, uint32_t invocations);

// Runs the probe on the context's device: empty, or what differs.
std::string probe_subgroups(VulkanContext& context);

}  // namespace tessera
