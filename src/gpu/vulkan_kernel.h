// One compute shader (SPIR-V embedded in the binary), its storage buffers
// bound in order at set 0, bindings 0..n-1, and push constants; run() records
// the dispatch, submits it and waits.
#pragma once

#include "gpu/vulkan_buffer.h"

#include <cstdint>
#include <vector>

namespace tessera {

class VulkanKernel {
public:
    VulkanKernel(VulkanContext& context, const uint32_t* spirv, size_t words, int n_buffers, uint32_t push_bytes,
                 const char* name);
    ~VulkanKernel();
    VulkanKernel(const VulkanKernel&) = delete;
    VulkanKernel& operator=(const VulkanKernel&) = delete;

    void run(const std::vector<const VulkanBuffer*>& buffers, const void* push, uint32_t groups_x, uint32_t groups_y = 1);

private:
    VulkanContext& context_;
    int n_buffers_;
    uint32_t push_bytes_;
    const char* name_;
    VkShaderModule module_ = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

}  // namespace tessera
