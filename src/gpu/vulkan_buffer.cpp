#include "gpu/vulkan_buffer.h"

#include "util/error.h"

#include <cstring>

namespace tessera {

VulkanBuffer::VulkanBuffer(VulkanContext& context, size_t bytes) : context_(context), bytes_(bytes) {
    const VulkanDeviceInfo& info = context.info();
    if (bytes == 0) throw make_error("internal: a Vulkan buffer of 0 bytes");
    if (bytes > info.max_storage_buffer_bytes) {
        throw make_error("a buffer of {} bytes exceeds Vulkan device {} ({})'s largest storage buffer, {} bytes", bytes,
                         info.index, info.name, info.max_storage_buffer_bytes);
    }
    VkDevice d = context.device();
    VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    create.size = bytes;
    create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    vk_check(vkCreateBuffer(d, &create, nullptr, &buffer_), "vkCreateBuffer");
    VkMemoryRequirements need;
    vkGetBufferMemoryRequirements(d, buffer_, &need);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = need.size;
    try {
        alloc.memoryTypeIndex = context.memory_type(
            need.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        const VkResult r = vkAllocateMemory(d, &alloc, nullptr, &memory_);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
            throw make_error("Vulkan device {} ({}) is out of memory for a buffer of {} bytes", info.index, info.name,
                             bytes);
        }
        vk_check(r, "vkAllocateMemory");
        vk_check(vkBindBufferMemory(d, buffer_, memory_, 0), "vkBindBufferMemory");
        vk_check(vkMapMemory(d, memory_, 0, bytes, 0, &mapped_), "vkMapMemory");
    } catch (...) {
        if (memory_ != VK_NULL_HANDLE) vkFreeMemory(d, memory_, nullptr);
        vkDestroyBuffer(d, buffer_, nullptr);
        throw;
    }
}

VulkanBuffer::~VulkanBuffer() {
    VkDevice d = context_.device();
    if (mapped_ != nullptr) vkUnmapMemory(d, memory_);
    vkFreeMemory(d, memory_, nullptr);
    vkDestroyBuffer(d, buffer_, nullptr);
}

void VulkanBuffer::upload(const void* data, size_t bytes, size_t offset) {
    if (offset > bytes_ || bytes > bytes_ - offset) throw make_error("internal: upload past a Vulkan buffer's end");
    std::memcpy(static_cast<char*>(mapped_) + offset, data, bytes);
}

void VulkanBuffer::download(void* data, size_t bytes, size_t offset) const {
    if (offset > bytes_ || bytes > bytes_ - offset) throw make_error("internal: download past a Vulkan buffer's end");
    std::memcpy(data, static_cast<const char*>(mapped_) + offset, bytes);
}

}  // namespace tessera
