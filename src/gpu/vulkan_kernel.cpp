#include "gpu/vulkan_kernel.h"

#include "util/error.h"

namespace tessera {

VulkanKernel::VulkanKernel(VulkanContext& context, const uint32_t* spirv, size_t words, int n_buffers,
                           uint32_t push_bytes, const char* name)
    : context_(context), n_buffers_(n_buffers), push_bytes_(push_bytes), name_(name) {
    VkDevice d = context.device();
    VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module.codeSize = words * 4;
    module.pCode = spirv;
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
    pipeline.layout = layout_;
    vk_check(vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &pipeline, nullptr, &pipeline_), "vkCreateComputePipelines");
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(n_buffers)};
    VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pool.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
    pool.maxSets = 1;
    pool.poolSizeCount = 1;
    pool.pPoolSizes = &size;
    vk_check(vkCreateDescriptorPool(d, &pool, nullptr, &pool_), "vkCreateDescriptorPool");
}

VulkanKernel::~VulkanKernel() {
    VkDevice d = context_.device();
    vkDestroyDescriptorPool(d, pool_, nullptr);
    vkDestroyPipeline(d, pipeline_, nullptr);
    vkDestroyPipelineLayout(d, layout_, nullptr);
    vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
    vkDestroyShaderModule(d, module_, nullptr);
}

void VulkanKernel::run(const std::vector<const VulkanBuffer*>& buffers, const void* push, uint32_t groups_x,
                       uint32_t groups_y) {
    if (static_cast<int>(buffers.size()) != n_buffers_) {
        throw make_error("internal: kernel {} takes {} buffers, got {}", name_, n_buffers_, buffers.size());
    }
    VkDevice d = context_.device();
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = pool_;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layout_;
    VkDescriptorSet set = VK_NULL_HANDLE;
    vk_check(vkAllocateDescriptorSets(d, &alloc, &set), "vkAllocateDescriptorSets");
    struct Free {
        VkDevice d;
        VkDescriptorPool p;
        VkDescriptorSet s;
        ~Free() { vkFreeDescriptorSets(d, p, 1, &s); }
    } free_it{d, pool_, set};
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
    vkUpdateDescriptorSets(d, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    context_.run([&](VkCommandBuffer cb) {
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set, 0, nullptr);
        if (push_bytes_ > 0) vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
        vkCmdDispatch(cb, groups_x, groups_y, 1);
        // The host reads the results once the fence says the queue is done:
        // make the shader's writes visible to it.
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0,
                             nullptr, 0, nullptr);
    });
}

}  // namespace tessera
