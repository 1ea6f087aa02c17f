// A Vulkan device for compute: the instance, one physical device chosen by
// index (`--device vulkan:N`), its logical device with one compute queue,
// and what the kernels need to know of it. Every failure is a
// tessera::Error naming the call and the device, never an abort.
//
// First step of the Vulkan backend (issue 45): devices, buffers and kernels
// (vulkan_buffer.h, vulkan_kernel.h) with the canonical-order matrix-vector
// products of F32 and Q8_0 weights (gpu/matvec.h); the forward pass does not
// use them yet.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

struct VulkanDeviceInfo {
    int index = 0;
    std::string name;
    std::string type;  // "discrete", "integrated", "virtual", "cpu" or "other"
    uint64_t device_local_bytes = 0;  // the largest device-local heap
    uint64_t max_storage_buffer_bytes = 0;
    uint32_t subgroup_size = 0;
    uint32_t api_version = 0;
    bool shader_int64 = false;
    bool shader_float64 = false;
    // VK_KHR_shader_integer_dot_product: packed 4x8-bit dot products
    // (the products' exact integer sums in one instruction), and whether
    // the device says they are faster than the plain multiply-adds.
    bool integer_dot = false;
    bool integer_dot_accelerated = false;
    bool subgroup_shuffle = false;  // subgroupShuffleXor in compute shaders
    // VK_KHR_shader_float_controls' DenormPreserve for 32-bit floats: the
    // kernels keep subnormal results as the CPU does (vulkan_kernel.cpp adds
    // the mode to every shader); without it a driver may flush them to zero
    // (NVIDIA's does).
    bool denorm_preserve = false;
    bool float_controls_core = false;  // Vulkan 1.2's, on this instance and device (no extension to enable)
};

// Whether the block products sum their integers with the packed dot
// instructions (the *_idot shaders): wherever the device has them, or as
// TESSERA_VULKAN_DOT says ("packed" or "plain", for tests and benchmarks).
// Either gives the same bits: the sums are exact.
bool integer_dot_products(const VulkanDeviceInfo& info);

// Whether the float products run their 16-lane tree with subgroup shuffles
// (the *_sg shaders, subgroup_tree.glsl) when they run a workgroup per row:
// where the device shuffles in subgroups of 16, 32 or 64, or as
// TESSERA_VULKAN_SUBGROUPS says ("on" or "off"). Same bits either way.
bool subgroup_trees(const VulkanDeviceInfo& info);

// Every Vulkan device this machine offers (empty when there is no loader,
// no driver or no device).
std::vector<VulkanDeviceInfo> vulkan_devices();

class VulkanContext {
public:
    // Device `index` of vulkan_devices(); throws an Error naming the devices
    // there are when it does not exist.
    explicit VulkanContext(int index = 0);
    ~VulkanContext();
    VulkanContext(const VulkanContext&) = delete;
    VulkanContext& operator=(const VulkanContext&) = delete;

    const VulkanDeviceInfo& info() const { return info_; }
    // Whether the device's own fma rounds once (gpu/fma_probe.h), probed on
    // first use.
    bool native_fma();
    // Empty when the device's subgroups are as the subgroup-per-row products
    // assume (gpu/subgroup_probe.h), else what differs; probed on first use.
    const std::string& subgroup_mismatch();
    VkDevice device() const { return device_; }
    VkPhysicalDevice physical_device() const { return physical_; }

    // A memory type with these properties among the allowed bits; throws
    // when the device has none.
    uint32_t memory_type(uint32_t allowed_bits, VkMemoryPropertyFlags properties) const;

    // Records commands into a one-time command buffer, submits it and waits
    // for it (bounded: a device that does not finish in `timeout_ms` is an
    // Error, not a hang).
    template <typename Record>
    void run(Record record, uint64_t timeout_ms = 60000) {
        VkCommandBuffer cb = begin();
        record(cb);
        submit_and_wait(cb, timeout_ms);
    }

    // TESSERA_VULKAN_PROFILE=1: a timestamp after each dispatch a kernel
    // records (VulkanKernel::record calls this), the time since the one
    // before summed per kernel and grid; the table goes to stderr when the
    // context ends. Without the variable this does nothing.
    void mark(VkCommandBuffer cb, const char* kernel, uint32_t groups_x, uint32_t groups_y, uint32_t groups_z);

private:
    VkCommandBuffer begin();
    void submit_and_wait(VkCommandBuffer cb, uint64_t timeout_ms);
    struct Profile;
    void print_profile() const;
    void release();  // the device's objects, by the destructor or a failed constructor

    VulkanDeviceInfo info_;
    VkInstance instance_ = VK_NULL_HANDLE;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t queue_family_ = 0;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    int native_fma_ = -1;  // -1: not probed yet
    int subgroups_probed_ = 0;
    std::string subgroup_mismatch_;
    std::unique_ptr<Profile> profile_;  // with TESSERA_VULKAN_PROFILE
};

// "vkCreateDevice failed: VK_ERROR_OUT_OF_DEVICE_MEMORY" style messages.
void vk_check(VkResult result, const char* call);

}  // namespace tessera
