// One compute shader (SPIR-V embedded in the binary), its storage buffers
// bound in order at set 0, bindings 0..n-1, and push constants. run()
// records one dispatch, submits it and waits (tests, one-off work); a
// forward pass binds its buffers once (bind: a descriptor set kept with the
// kernel for those buffers) and records many dispatches into one command
// buffer (record), each followed by a barrier so the next one reads what it
// wrote.
#pragma once

#include "gpu/vulkan_buffer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace tessera {

class VulkanKernel {
public:
    // native_fma: the shaders' kNativeFma (shaders/exact_fma.glsl); by
    // default the context's probe decides.
    VulkanKernel(VulkanContext& context, const uint32_t* spirv, size_t words, int n_buffers, uint32_t push_bytes,
                 const char* name, std::optional<bool> native_fma = std::nullopt);
    ~VulkanKernel();
    VulkanKernel(const VulkanKernel&) = delete;
    VulkanKernel& operator=(const VulkanKernel&) = delete;

    void run(const std::vector<const VulkanBuffer*>& buffers, const void* push, uint32_t groups_x, uint32_t groups_y = 1);

    // The descriptor set of these buffers (made once, then reused).
    VkDescriptorSet bind(const std::vector<const VulkanBuffer*>& buffers);
    // A dispatch of this kernel with a set from bind, then a compute-to-compute
    // barrier unless `then_barrier` is false (the next dispatch reads nothing
    // this one writes: Q, K and V of one input, say).
    void record(VkCommandBuffer cb, VkDescriptorSet set, const void* push, uint32_t groups_x, uint32_t groups_y = 1,
                uint32_t groups_z = 1, bool then_barrier = true) const;
    const char* name() const { return name_; }

private:
    VkDescriptorSet allocate_set();
    void write_set(VkDescriptorSet set, const std::vector<const VulkanBuffer*>& buffers);

    VulkanContext& context_;
    int n_buffers_;
    uint32_t push_bytes_;
    const char* name_;
    VkShaderModule module_ = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    // Pools of kSetsPerPool sets each, one more whenever the last is full.
    std::vector<VkDescriptorPool> pools_;
    uint32_t sets_in_last_pool_ = 0;
    std::map<std::vector<VkBuffer>, VkDescriptorSet> sets_;
};

// A kernel made on its first use: a forward pass holds a kernel for every
// weight type and every family's activation, and builds only those its
// model uses (each pipeline is a shader compile, about 20 ms on lavapipe,
// most of a small model's start before this). Not for concurrent first
// uses: one thread records a forward pass.
class LazyVulkanKernel {
public:
    LazyVulkanKernel() = default;
    LazyVulkanKernel(VulkanContext& context, const uint32_t* spirv, size_t words, int n_buffers, uint32_t push_bytes,
                     const char* name)
        : context_(&context), spirv_(spirv), words_(words), n_buffers_(n_buffers), push_bytes_(push_bytes), name_(name) {}

    VulkanKernel& get();
    VulkanKernel* operator->() { return &get(); }
    bool made() const { return kernel_ != nullptr; }
    const char* name() const { return name_; }

private:
    VulkanContext* context_ = nullptr;
    const uint32_t* spirv_ = nullptr;
    size_t words_ = 0;
    int n_buffers_ = 0;
    uint32_t push_bytes_ = 0;
    const char* name_ = "";
    std::unique_ptr<VulkanKernel> kernel_;
};

// The SPIR-V module with 32-bit floats' DenormPreserve execution mode added
// to its entry point (and the capability and extension that declare it):
// every shader keeps subnormals, where the device promises it
// (VulkanDeviceInfo::denorm_preserve). Throws on a module it cannot parse.
std::vector<uint32_t> with_denorm_preserve(const uint32_t* spirv, size_t words);

// Makes the host's writes to mapped buffers visible to the shaders of the
// commands after it, and the shaders' writes visible to the host once the
// submission is done: the first and last commands of a recording.
void record_host_to_compute(VkCommandBuffer cb);
// A barrier after dispatches recorded without one (record's then_barrier).
void record_compute_barrier(VkCommandBuffer cb);
// Zeros bytes [offset, offset + bytes) of a buffer inside a recording, the
// commands after it seeing the zeros.
void record_zero(VkCommandBuffer cb, const VulkanBuffer& buffer, size_t offset, size_t bytes);
void record_compute_to_host(VkCommandBuffer cb);

}  // namespace tessera
