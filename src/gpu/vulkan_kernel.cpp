#include "gpu/vulkan_kernel.h"

#include "gpu/shaders.h"
#include "util/error.h"

#include <cstddef>
#include <cstring>
#include <vector>

namespace tessera {

std::vector<uint32_t> with_denorm_preserve(const uint32_t* spirv, size_t words) {
    constexpr uint32_t kMagic = 0x07230203, kHeader = 5;
    constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpEntryPoint = 15, kOpExecutionMode = 16;
    constexpr uint32_t kCapabilityDenormPreserve = 4464, kModeDenormPreserve = 4459;
    if (words < kHeader || spirv[0] != kMagic) throw make_error("internal: not a SPIR-V module ({} words)", words);
    // "SPV_KHR_float_controls" with its terminating zero, in little-endian words.
    static const char kName[] = "SPV_KHR_float_controls";
    std::vector<uint32_t> name((sizeof kName + 3) / 4, 0);
    std::memcpy(name.data(), kName, sizeof kName);
    std::vector<uint32_t> out(spirv, spirv + kHeader);
    bool added_capability = false, added_mode = false;
    for (size_t i = kHeader; i < words;) {
        const uint32_t count = spirv[i] >> 16, opcode = spirv[i] & 0xffffu;
        if (count == 0 || i + count > words) throw make_error("internal: a malformed SPIR-V instruction at word {}", i);
        // The capability and the extension go before the first instruction
        // that is neither (the module's layout: capabilities, extensions, ...).
        if (!added_capability && opcode != kOpCapability) {
            out.insert(out.end(), {(2u << 16) | kOpCapability, kCapabilityDenormPreserve});
            out.push_back((static_cast<uint32_t>(1 + name.size()) << 16) | kOpExtension);
            out.insert(out.end(), name.begin(), name.end());
            added_capability = true;
        }
        out.insert(out.end(), spirv + i, spirv + i + count);
        if (opcode == kOpEntryPoint && !added_mode) {  // the mode for 32-bit floats, right after the entry point
            out.insert(out.end(), {(4u << 16) | kOpExecutionMode, spirv[i + 2], kModeDenormPreserve, 32u});
            added_mode = true;
        }
        i += count;
    }
    if (!added_mode) throw make_error("internal: a SPIR-V module without an entry point");
    return out;
}

VulkanKernel::VulkanKernel(VulkanContext& context, const uint32_t* spirv, size_t words, int n_buffers,
                           uint32_t push_bytes, const char* name, std::optional<bool> native_fma)
    : context_(context), n_buffers_(n_buffers), push_bytes_(push_bytes), name_(name) {
    VkDevice d = context.device();
    // Subnormal results kept, as on the CPU, where the device can promise it.
    const std::vector<uint32_t> code = context.info().denorm_preserve ? with_denorm_preserve(spirv, words)
                                                                       : std::vector<uint32_t>(spirv, spirv + words);
    VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module.codeSize = code.size() * 4;
    module.pCode = code.data();
    vk_check(vkCreateShaderModule(d, &module, nullptr, &module_), "vkCreateShaderModule");
    std::vector<VkDescriptorSetLayoutBinding> bindings(static_cast<size_t>(n_buffers));
    for (int i = 0; i < n_buffers; ++i) {
        bindings[static_cast<size_t>(i)] = {static_cast<uint32_t>(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                            VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    }
    VkDescriptorSetLayoutCreateInfo set{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set.bindingCount = static_cast<uint32_t>(n_buffers);
    set.pBindings = bindings.data();
    vk_check(vkCreateDescriptorSetLayout(d, &set, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &set_layout_;
    layout.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    layout.pPushConstantRanges = &range;
    vk_check(vkCreatePipelineLayout(d, &layout, nullptr, &layout_), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo pipeline{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    pipeline.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    pipeline.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pipeline.stage.module = module_;
    pipeline.stage.pName = "main";
    const bool use_native = native_fma.has_value() ? *native_fma : context.native_fma();  // not value_or: the probe makes a kernel too
    // Constant 0: exact_fma.glsl's kNativeFma; 1 and 2: matmul_common.glsl's
    // tile (shaders without them ignore their entries).
    const ProductTile tile = product_tile();
    const struct {
        VkBool32 native;
        uint32_t dots, tokens;
    } constants{use_native ? VK_TRUE : VK_FALSE, tile.dots, tile.tokens};
    const VkSpecializationMapEntry entries[] = {{0, offsetof(decltype(constants), native), sizeof(VkBool32)},
                                                {1, offsetof(decltype(constants), dots), sizeof(uint32_t)},
                                                {2, offsetof(decltype(constants), tokens), sizeof(uint32_t)}};
    VkSpecializationInfo specialization{3, entries, sizeof(constants), &constants};
    pipeline.stage.pSpecializationInfo = &specialization;
    pipeline.layout = layout_;
    vk_check(vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &pipeline, nullptr, &pipeline_), "vkCreateComputePipelines");
}

VulkanKernel& LazyVulkanKernel::get() {
    if (kernel_ == nullptr) {
        if (context_ == nullptr) throw make_error("internal: kernel {} used before it was given its shader", name_);
        kernel_ = std::make_unique<VulkanKernel>(*context_, spirv_, words_, n_buffers_, push_bytes_, name_);
    }
    return *kernel_;
}

VulkanKernel::~VulkanKernel() {
    VkDevice d = context_.device();
    for (VkDescriptorPool pool : pools_) vkDestroyDescriptorPool(d, pool, nullptr);
    vkDestroyPipeline(d, pipeline_, nullptr);
    vkDestroyPipelineLayout(d, layout_, nullptr);
    vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
    vkDestroyShaderModule(d, module_, nullptr);
}

namespace {
constexpr uint32_t kSetsPerPool = 64;
}

VkDescriptorSet VulkanKernel::allocate_set() {
    VkDevice d = context_.device();
    if (pools_.empty() || sets_in_last_pool_ == kSetsPerPool) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(n_buffers_) * kSetsPerPool};
        VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        pool.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;  // run()'s sets go back
        pool.maxSets = kSetsPerPool;
        pool.poolSizeCount = 1;
        pool.pPoolSizes = &size;
        VkDescriptorPool created = VK_NULL_HANDLE;
        vk_check(vkCreateDescriptorPool(d, &pool, nullptr, &created), "vkCreateDescriptorPool");
        pools_.push_back(created);
        sets_in_last_pool_ = 0;
    }
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = pools_.back();
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layout_;
    VkDescriptorSet set = VK_NULL_HANDLE;
    vk_check(vkAllocateDescriptorSets(d, &alloc, &set), "vkAllocateDescriptorSets");
    ++sets_in_last_pool_;
    return set;
}

VkDescriptorSet VulkanKernel::bind(const std::vector<const VulkanBuffer*>& buffers) {
    if (static_cast<int>(buffers.size()) != n_buffers_) {
        throw make_error("internal: kernel {} takes {} buffers, got {}", name_, n_buffers_, buffers.size());
    }
    std::vector<VkBuffer> key;
    for (const VulkanBuffer* b : buffers) key.push_back(b->handle());
    if (auto it = sets_.find(key); it != sets_.end()) return it->second;
    const VkDescriptorSet set = allocate_set();
    write_set(set, buffers);
    sets_.emplace(std::move(key), set);
    return set;
}

void VulkanKernel::write_set(VkDescriptorSet set, const std::vector<const VulkanBuffer*>& buffers) {
    std::vector<VkDescriptorBufferInfo> infos(buffers.size());
    std::vector<VkWriteDescriptorSet> writes(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
        infos[i] = {buffers[i]->handle(), 0, VK_WHOLE_SIZE};
        writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstSet = set;
        writes[i].dstBinding = static_cast<uint32_t>(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(context_.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
}

void VulkanKernel::record(VkCommandBuffer cb, VkDescriptorSet set, const void* push, uint32_t groups_x,
                          uint32_t groups_y, uint32_t groups_z, bool then_barrier) const {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set, 0, nullptr);
    if (push_bytes_ > 0) vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
    vkCmdDispatch(cb, groups_x, groups_y, groups_z);
    context_.mark(cb, name_, groups_x, groups_y, groups_z);
    if (then_barrier) record_compute_barrier(cb);
}

namespace {
// One global memory barrier between the stages' accesses.
void memory_barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                    VkAccessFlags dst) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = src;
    barrier.dstAccessMask = dst;
    vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}
constexpr VkAccessFlags kShaderAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
}  // namespace

void record_host_to_compute(VkCommandBuffer cb) {
    memory_barrier(cb, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                   kShaderAccess);
}

void record_compute_barrier(VkCommandBuffer cb) {
    memory_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess);
}

void record_zero(VkCommandBuffer cb, const VulkanBuffer& buffer, size_t offset, size_t bytes) {
    vkCmdFillBuffer(cb, buffer.handle(), offset, bytes, 0);
    memory_barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                   kShaderAccess);
}

void record_compute_to_host(VkCommandBuffer cb) {
    memory_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                   VK_ACCESS_HOST_READ_BIT);
}

void VulkanKernel::run(const std::vector<const VulkanBuffer*>& buffers, const void* push, uint32_t groups_x,
                       uint32_t groups_y) {
    if (static_cast<int>(buffers.size()) != n_buffers_) {
        throw make_error("internal: kernel {} takes {} buffers, got {}", name_, n_buffers_, buffers.size());
    }
    // A set of its own, freed after: these buffers may not outlive the call
    // (and another buffer may later get the same handle).
    const VkDescriptorSet set = allocate_set();
    struct Free {
        VkDevice d;
        VkDescriptorPool p;
        VkDescriptorSet s;
        uint32_t* in_pool;
        ~Free() {
            vkFreeDescriptorSets(d, p, 1, &s);
            --*in_pool;
        }
    } free_it{context_.device(), pools_.back(), set, &sets_in_last_pool_};
    write_set(set, buffers);
    context_.run([&](VkCommandBuffer cb) {
        record_host_to_compute(cb);
        record(cb, set, push, groups_x, groups_y);
        record_compute_to_host(cb);
    });
}

}  // namespace tessera
