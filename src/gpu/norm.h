// RMS norm on a Vulkan device, bit for bit ops/norm.cpp's rms_norm: each row
// of x (rows x n floats) normed and multiplied by weight (n floats).
#pragma once

#include "gpu/vulkan_kernel.h"

#include <memory>
#include <vector>

namespace tessera {

class VulkanRmsNorm {
public:
    explicit VulkanRmsNorm(VulkanContext& context);
    std::vector<float> run(const float* x, int rows, int n, const float* weight, float eps);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

}  // namespace tessera
