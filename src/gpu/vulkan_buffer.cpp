#include "gpu/vulkan_buffer.h"

#include "util/error.h"

#include <cstring>
#include <vector>

namespace tessera {

namespace {
constexpr VkMemoryPropertyFlags kMappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

// The memory type for a buffer of `memory` kind: device memory the host can
// map first, then any device memory; host memory the host maps.
uint32_t choose_type(const VulkanContext& context, uint32_t allowed, VulkanMemory memory, bool* mappable) {
    if (memory == VulkanMemory::kDevice) {
        try {
            const uint32_t t = context.memory_type(allowed, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | kMappable);
            *mappable = true;
            return t;
        } catch (const Error&) {
            *mappable = false;
            return context.memory_type(allowed, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        }
    }
    *mappable = true;
    return context.memory_type(allowed, kMappable);
}
}  // namespace

VulkanBuffer::VulkanBuffer(VulkanContext& context, size_t bytes, VulkanMemory memory)
    : context_(context), bytes_(bytes) {
    const VulkanDeviceInfo& info = context.info();
    if (bytes == 0) throw make_error("internal: a Vulkan buffer of 0 bytes");
    if (bytes > info.max_storage_buffer_bytes) {
        throw make_error("a buffer of {} bytes exceeds Vulkan device {} ({})'s largest storage buffer, {} bytes", bytes,
                         info.index, info.name, info.max_storage_buffer_bytes);
    }
    VkDevice d = context.device();
    VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    create.size = bytes;
    create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    vk_check(vkCreateBuffer(d, &create, nullptr, &buffer_), "vkCreateBuffer");
    VkMemoryRequirements need;
    vkGetBufferMemoryRequirements(d, buffer_, &need);
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = need.size;
    try {
        bool mappable = false;
        alloc.memoryTypeIndex = choose_type(context, need.memoryTypeBits, memory, &mappable);
        const VkResult r = vkAllocateMemory(d, &alloc, nullptr, &memory_);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
            throw make_error("Vulkan device {} ({}) is out of memory for a buffer of {} bytes", info.index, info.name,
                             bytes);
        }
        vk_check(r, "vkAllocateMemory");
        vk_check(vkBindBufferMemory(d, buffer_, memory_, 0), "vkBindBufferMemory");
        if (mappable) vk_check(vkMapMemory(d, memory_, 0, bytes, 0, &mapped_), "vkMapMemory");
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

void VulkanBuffer::staged(void* host, size_t bytes, size_t offset, bool upload) const {
    VulkanBuffer staging(context_, bytes, VulkanMemory::kHost);
    if (upload) std::memcpy(staging.mapped_, host, bytes);
    context_.run([&](VkCommandBuffer cb) {
        const VkBufferCopy region{upload ? 0 : offset, upload ? offset : 0, bytes};
        vkCmdCopyBuffer(cb, upload ? staging.buffer_ : buffer_, upload ? buffer_ : staging.buffer_, 1, &region);
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT;
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0,
                             nullptr, 0, nullptr);
    });
    if (!upload) std::memcpy(host, staging.mapped_, bytes);
}

void VulkanBuffer::upload(const void* data, size_t bytes, size_t offset) {
    if (offset > bytes_ || bytes > bytes_ - offset) throw make_error("internal: upload past a Vulkan buffer's end");
    if (bytes == 0) return;
    if (mapped_ != nullptr) {
        std::memcpy(static_cast<char*>(mapped_) + offset, data, bytes);
        return;
    }
    staged(const_cast<void*>(data), bytes, offset, true);
}

void VulkanBuffer::download(void* data, size_t bytes, size_t offset) const {
    if (offset > bytes_ || bytes > bytes_ - offset) throw make_error("internal: download past a Vulkan buffer's end");
    if (bytes == 0) return;
    if (mapped_ != nullptr) {
        std::memcpy(data, static_cast<const char*>(mapped_) + offset, bytes);
        return;
    }
    staged(data, bytes, offset, false);
}

void VulkanBuffer::zero() {
    if (mapped_ != nullptr) {
        std::memset(mapped_, 0, bytes_);
        return;
    }
    context_.run([&](VkCommandBuffer cb) {
        vkCmdFillBuffer(cb, buffer_, 0, VK_WHOLE_SIZE, 0);
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier,
                             0, nullptr, 0, nullptr);
    });
}

}  // namespace tessera
