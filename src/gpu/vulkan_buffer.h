// A storage buffer in memory the host can map (lavapipe's and integrated
// GPUs' only kind; a discrete GPU's upload through a staging buffer comes
// with the forward pass). Out of device memory is an Error naming the device
// and the bytes.
#pragma once

#include "gpu/vulkan_context.h"

#include <cstddef>

namespace tessera {

class VulkanBuffer {
public:
    VulkanBuffer(VulkanContext& context, size_t bytes);
    ~VulkanBuffer();
    VulkanBuffer(const VulkanBuffer&) = delete;
    VulkanBuffer& operator=(const VulkanBuffer&) = delete;

    void upload(const void* data, size_t bytes, size_t offset = 0);
    void download(void* data, size_t bytes, size_t offset = 0) const;
    VkBuffer handle() const { return buffer_; }
    size_t size() const { return bytes_; }

private:
    VulkanContext& context_;
    size_t bytes_;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    void* mapped_ = nullptr;
};

}  // namespace tessera
