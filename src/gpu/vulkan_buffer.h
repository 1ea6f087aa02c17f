// A storage buffer on a Vulkan device. kHost: memory the host maps (the
// activations that cross to the CPU, test data). kDevice: the device's own
// memory for what stays there (weights, KV caches, scratch); mapped too where
// the device offers device-local memory the host can see (lavapipe,
// integrated GPUs, resizable BAR), else filled and read through a staging
// buffer. Out of device memory is an Error naming the device and the bytes.
#pragma once

#include "gpu/vulkan_context.h"

#include <cstddef>

namespace tessera {

enum class VulkanMemory { kHost, kDevice };

class VulkanBuffer {
public:
    VulkanBuffer(VulkanContext& context, size_t bytes, VulkanMemory memory = VulkanMemory::kHost);
    ~VulkanBuffer();
    VulkanBuffer(const VulkanBuffer&) = delete;
    VulkanBuffer& operator=(const VulkanBuffer&) = delete;

    // Outside a recording only (a staged copy submits work of its own).
    void upload(const void* data, size_t bytes, size_t offset = 0);
    void download(void* data, size_t bytes, size_t offset = 0) const;
    // Sets every byte to zero.
    void zero();
    VkBuffer handle() const { return buffer_; }
    size_t size() const { return bytes_; }
    bool mapped() const { return mapped_ != nullptr; }

private:
    // Copies through a host-visible buffer of `bytes` (upload: to this one).
    void staged(void* host, size_t bytes, size_t offset, bool upload) const;

    VulkanContext& context_;
    size_t bytes_;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    void* mapped_ = nullptr;
};

}  // namespace tessera
