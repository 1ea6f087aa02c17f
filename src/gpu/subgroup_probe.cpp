#include "gpu/subgroup_probe.h"

#include "gpu/shaders.h"
#include "gpu/vulkan_kernel.h"

#include <fmt/format.h>

namespace tessera {

std::string subgroup_probe_mismatch(const std::vector<uint32_t>& words, uint32_t invocations) {
    for (uint32_t i = 0; i < invocations; ++i) {
        const uint32_t* v = words.data() + static_cast<size_t>(i) * kSubgroupProbeWords;
        const uint32_t size = v[0], lane = v[1];
        if (size == 0 || size > 64 || 64 % size != 0) return fmt::format("a subgroup size of {}", size);
        if (lane != i % size || v[2] != (i % 64) / size || v[3] != 64 / size) {
            return fmt::format("subgroups of {}, yet invocation {} is lane {} of subgroup {} of {}", size, i, lane, v[2],
                               v[3]);
        }
        const uint32_t first = i - lane;
        uint32_t k = 4;
        for (uint32_t d = 1; d < 64; d *= 2, ++k) {
            if (d < size && v[k] != first + (lane ^ d)) {
                return fmt::format("subgroups of {}: a shuffle by xor {} in invocation {} read invocation {}", size, d, i,
                                   v[k]);
            }
        }
        for (uint32_t src = 0; src < 64; ++src, ++k) {
            if (src < size && v[k] != first + src) {
                return fmt::format("subgroups of {}: a shuffle from lane {} in invocation {} read invocation {}", size,
                                   src, i, v[k]);
            }
        }
    }
    return "";
}

std::string probe_subgroups(VulkanContext& context) {
    const uint32_t groups = 4, n = 64 * groups, stride = kSubgroupProbeWords;
    VulkanBuffer out(context, static_cast<size_t>(n) * stride * 4);
    VulkanKernel kernel(context, TESSERA_SPIRV(subgroup_probe), 1, 4, "subgroup_probe", false);
    kernel.run({&out}, &stride, groups);
    std::vector<uint32_t> words(static_cast<size_t>(n) * stride);
    out.download(words.data(), words.size() * 4);
    return subgroup_probe_mismatch(words, n);
}

}  // namespace tessera
