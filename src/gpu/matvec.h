// Matrix-vector products on a Vulkan device in the canonical order of the
// CPU kernels (ops/float_canonical.h, ops/row_groups.h), so a row gives the
// CPU's bits: F32 and F16 weights with float activations, Q8_0 and Q4_0
// weights with Q8_0 activations, Q4_K and Q6_K weights with Q8_K activations. Each call uploads, runs and reads back (the forward pass will
// keep weights resident).
#pragma once

#include "gpu/vulkan_context.h"
#include "gpu/vulkan_kernel.h"

#include <memory>
#include <vector>

namespace tessera {

class VulkanMatvec {
public:
    // serial: an invocation per dot; else a workgroup per row (gpu/shaders.h).
    // packed: the block products' integer sums with the device's packed dot
    // instructions (int_dot.glsl; VulkanDeviceInfo::integer_dot). The float
    // products' trees run by subgroup shuffles where subgroup_trees() says.
    // subgroup_rows: Q8_0, Q4_0, Q4_K and Q6_K by a subgroup per row (gpu/shaders.h).
    VulkanMatvec(VulkanContext& context, bool serial, bool packed = false, bool subgroup_rows = false);
    ~VulkanMatvec();

    // w: rows x n floats, row-major; x: n floats.
    std::vector<float> f32(const float* w, int rows, int n, const float* x);
    // w: rows x n halves, row-major; x: n floats.
    std::vector<float> f16(const void* w, int rows, int n, const float* x);
    // w: rows x (n / 32) Q8_0 blocks (34 bytes each), row-major; x: n / 32 Q8_0 blocks.
    std::vector<float> q8_0(const void* w, int rows, int n, const void* x);
    // w: rows x (n / 32) Q4_0 blocks (18 bytes each), row-major; x: n / 32 Q8_0 blocks.
    std::vector<float> q4_0(const void* w, int rows, int n, const void* x);
    // w: rows x (n / 256) Q4_K (144 bytes) or Q6_K (210 bytes) blocks; x: n / 256 Q8_K blocks (292 bytes).
    std::vector<float> q4_k(const void* w, int rows, int n, const void* x);
    std::vector<float> q6_k(const void* w, int rows, int n, const void* x);

private:
    // by_subgroup: the kernel is a *_sr build (a subgroup per row).
    std::vector<float> run(VulkanKernel& kernel, const void* w, size_t w_bytes, const void* x, size_t x_bytes,
                           uint32_t a, int rows, bool by_subgroup = false);
    std::vector<float> blocks(VulkanKernel& kernel, const char* type, int block, size_t w_bytes, size_t x_bytes,
                              const void* w, int rows, int n, const void* x, bool by_subgroup);

    VulkanContext& context_;
    bool serial_;
    bool subgroup_rows_;
    LazyVulkanKernel f32_, f16_, q8_0_, q4_0_, q4_k_, q6_k_;  // made on first use
};

}  // namespace tessera
