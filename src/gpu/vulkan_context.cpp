#include "gpu/vulkan_context.h"

#include "gpu/fma_probe.h"
#include "gpu/subgroup_probe.h"

#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace tessera {

namespace {

const char* result_name(VkResult r) {
    switch (r) {
        case VK_SUCCESS: return "VK_SUCCESS";
        case VK_TIMEOUT: return "VK_TIMEOUT";
        case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
        case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
        default: return "a Vulkan error";
    }
}

const char* type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
        default: return "other";
    }
}

// Vulkan 1.2 where the loader has it: its core float controls (DenormPreserve)
// are then queried and used on 1.2 devices, whether or not they still list
// the extension.
uint32_t instance_version() {
    uint32_t version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS) version = VK_API_VERSION_1_0;
    return version >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;
}

VkInstance new_instance() {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "tessera";
    app.apiVersion = instance_version();
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    VkInstance instance = VK_NULL_HANDLE;
    vk_check(vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance");
    return instance;
}

// One instance for the process, never destroyed: destroying it unloads the
// driver, and Mesa's drivers leave a few allocations behind each time they
// are unloaded (LeakSanitizer reports them from an unknown module). Kept,
// the driver stays loaded for the process's life, as a GPU program's does.
VkInstance create_instance() {
    static std::mutex mutex;
    static VkInstance instance = VK_NULL_HANDLE;
    std::lock_guard<std::mutex> lock(mutex);
    if (instance == VK_NULL_HANDLE) instance = new_instance();
    return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
    uint32_t n = 0;
    vk_check(vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> devices(n);
    vk_check(vkEnumeratePhysicalDevices(instance, &n, devices.data()), "vkEnumeratePhysicalDevices");
    devices.resize(n);
    return devices;
}

bool has_extension(VkPhysicalDevice d, const char* name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> extensions(n);
    if (vkEnumerateDeviceExtensionProperties(d, nullptr, &n, extensions.data()) != VK_SUCCESS) return false;
    return std::any_of(extensions.begin(), extensions.begin() + n,
                       [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

VulkanDeviceInfo describe(VkPhysicalDevice d, int index) {
    VulkanDeviceInfo info;
    info.index = index;
    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &subgroup;
    vkGetPhysicalDeviceProperties2(d, &props);
    info.name = props.properties.deviceName;
    info.type = type_name(props.properties.deviceType);
    info.api_version = props.properties.apiVersion;
    info.max_storage_buffer_bytes = props.properties.limits.maxStorageBufferRange;
    info.subgroup_size = subgroup.subgroupSize;
    info.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(d, &memory);
    for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
        if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
            info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, memory.memoryHeaps[h].size);
        }
    }
    VkPhysicalDeviceFeatures features;
    vkGetPhysicalDeviceFeatures(d, &features);
    info.shader_int64 = features.shaderInt64 == VK_TRUE;
    info.shader_float64 = features.shaderFloat64 == VK_TRUE;
    info.float_controls_core = instance_version() >= VK_API_VERSION_1_2 && info.api_version >= VK_API_VERSION_1_2;
    if (info.float_controls_core || has_extension(d, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) {
        VkPhysicalDeviceFloatControlsPropertiesKHR controls{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES_KHR};
        VkPhysicalDeviceProperties2 with_controls{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        with_controls.pNext = &controls;
        vkGetPhysicalDeviceProperties2(d, &with_controls);
        info.denorm_preserve = controls.shaderDenormPreserveFloat32 == VK_TRUE;
    }
    // The extension's structures may be chained only where it is offered.
    if (has_extension(d, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
        VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
        VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        features2.pNext = &dot;
        vkGetPhysicalDeviceFeatures2(d, &features2);
        info.integer_dot = dot.shaderIntegerDotProduct == VK_TRUE;
        VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR dot_props{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
        VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        props2.pNext = &dot_props;
        vkGetPhysicalDeviceProperties2(d, &props2);
        // The shaders use the signed and the mixed-sign packed forms.
        info.integer_dot_accelerated = info.integer_dot &&
                                       dot_props.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE &&
                                       dot_props.integerDotProduct4x8BitPackedMixedSignednessAccelerated == VK_TRUE;
    }
    return info;
}

}  // namespace

bool integer_dot_products(const VulkanDeviceInfo& info) {
    if (const char* v = std::getenv("TESSERA_VULKAN_DOT"); v != nullptr && *v != '\0') {
        const std::string mode = v;
        if (mode == "plain") return false;
        if (mode != "packed") {
            throw make_error("TESSERA_VULKAN_DOT={}: packed (the integer dot instructions) or plain", mode);
        }
        if (!info.integer_dot) {
            throw make_error("TESSERA_VULKAN_DOT=packed: Vulkan device {} ({}) has no integer dot products "
                             "(VK_KHR_shader_integer_dot_product)", info.index, info.name);
        }
        return true;
    }
    // Wherever the device has them, accelerated or not: a word per four
    // codes instead of four byte extractions, which even lavapipe's
    // emulation of the instruction runs twice as fast (Q4_K and Q8_0 prompts).
    return info.integer_dot;
}

bool subgroup_trees(const VulkanDeviceInfo& info) {
    const bool fits = info.subgroup_shuffle && info.subgroup_size >= 16 && 64 % info.subgroup_size == 0;
    if (const char* v = std::getenv("TESSERA_VULKAN_SUBGROUPS"); v != nullptr && *v != '\0') {
        const std::string mode = v;
        if (mode == "off") return false;
        if (mode != "on") throw make_error("TESSERA_VULKAN_SUBGROUPS={}: on (shuffles) or off", mode);
        if (!fits) {
            throw make_error("TESSERA_VULKAN_SUBGROUPS=on: Vulkan device {} ({}) has subgroups of {}{}, and the products' "
                             "trees need shuffles in subgroups of 16, 32 or 64", info.index, info.name,
                             info.subgroup_size, info.subgroup_shuffle ? "" : " without shuffles");
        }
        return true;
    }
    return fits;
}

void vk_check(VkResult result, const char* call) {
    if (result != VK_SUCCESS) throw make_error("{} failed: {} ({})", call, result_name(result), static_cast<int>(result));
}

std::vector<VulkanDeviceInfo> vulkan_devices() {
    std::vector<VulkanDeviceInfo> out;
    VkInstance instance = VK_NULL_HANDLE;
    try {
        instance = create_instance();
        const auto devices = physical_devices(instance);
        for (size_t i = 0; i < devices.size(); ++i) out.push_back(describe(devices[i], static_cast<int>(i)));
    } catch (const Error&) {
        out.clear();  // no loader, no driver: no devices
    }
    return out;
}

// Where a token's time goes on the device: per kernel and grid, the time
// from the dispatch before it ended to its own end (its launch, its barrier
// and its work), summed over every submission of the context's life.
struct VulkanContext::Profile {
    static constexpr uint32_t kQueries = 1u << 14;
    VkQueryPool pool = VK_NULL_HANDLE;
    double period_ns = 1.0;
    uint64_t mask = ~0ull;
    std::vector<std::string> pending;  // the recording's marks, in order (query i + 1 ends pending[i])
    struct Row {
        uint64_t calls = 0;
        double ns = 0.0;
    };
    std::map<std::string, Row> rows;
    uint64_t submissions = 0;
    double device_ns = 0.0;  // first to last timestamp, summed
    double wait_ns = 0.0;    // submit to fence, summed
    double record_ns = 0.0;  // begin to submit (recording on the host), summed
    double host_ns = 0.0;    // a fence to the next begin (the host's own work between submissions), summed
    std::chrono::steady_clock::time_point began, fenced;
};

VulkanContext::VulkanContext(int index) {
    instance_ = create_instance();
    try {
        const auto devices = physical_devices(instance_);
        if (index < 0 || index >= static_cast<int>(devices.size())) {
            std::string names;
            for (size_t i = 0; i < devices.size(); ++i) {
                names += (i > 0 ? ", " : "") + std::to_string(i) + ": " + describe(devices[i], static_cast<int>(i)).name;
            }
            throw make_error("there is no Vulkan device {}: this machine has {} ({})", index, devices.size(),
                             names.empty() ? "none" : names);
        }
        physical_ = devices[static_cast<size_t>(index)];
        info_ = describe(physical_, index);
        uint32_t n_families = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n_families, nullptr);
        std::vector<VkQueueFamilyProperties> families(n_families);
        vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n_families, families.data());
        bool found = false;
        for (uint32_t f = 0; f < n_families && !found; ++f) {
            if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                queue_family_ = f;
                found = true;
            }
        }
        if (!found) throw make_error("Vulkan device {} ({}) has no compute queue", index, info_.name);
        const float priority = 1.0f;
        VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
        queue.queueFamilyIndex = queue_family_;
        queue.queueCount = 1;
        queue.pQueuePriorities = &priority;
        // The canonical order's single-rounding fma is built from doubles
        // (shaders/exact_fma.glsl).
        if (!info_.shader_float64) {
            throw make_error("Vulkan device {} ({}) lacks 64-bit floats (shaderFloat64), which its kernels need to "
                             "round as the CPU does", index, info_.name);
        }
        VkPhysicalDeviceFeatures2 enabled{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        enabled.features.shaderFloat64 = VK_TRUE;
        enabled.features.shaderInt64 = info_.shader_int64 ? VK_TRUE : VK_FALSE;
        VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
        std::vector<const char*> extensions;
        VkDeviceCreateInfo device{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        device.pNext = &enabled;
        if (info_.integer_dot) {
            dot.shaderIntegerDotProduct = VK_TRUE;
            enabled.pNext = &dot;
            extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
        }
        if (info_.denorm_preserve && !info_.float_controls_core) {
            extensions.push_back(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
        }
        device.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
        device.ppEnabledExtensionNames = extensions.data();
        device.queueCreateInfoCount = 1;
        device.pQueueCreateInfos = &queue;
        vk_check(vkCreateDevice(physical_, &device, nullptr, &device_), "vkCreateDevice");
        vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
        VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        pool.queueFamilyIndex = queue_family_;
        vk_check(vkCreateCommandPool(device_, &pool, nullptr, &pool_), "vkCreateCommandPool");
        VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        vk_check(vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence");
        if (const char* v = std::getenv("TESSERA_VULKAN_PROFILE"); v != nullptr && *v != '\0' && *v != '0') {
            if (families[queue_family_].timestampValidBits == 0) {
                throw make_error("TESSERA_VULKAN_PROFILE: Vulkan device {} ({}) has no timestamps on its compute queue",
                                 index, info_.name);
            }
            VkPhysicalDeviceProperties properties;
            vkGetPhysicalDeviceProperties(physical_, &properties);
            profile_ = std::make_unique<Profile>();
            profile_->period_ns = properties.limits.timestampPeriod;
            profile_->mask = families[queue_family_].timestampValidBits >= 64
                                 ? ~0ull
                                 : (1ull << families[queue_family_].timestampValidBits) - 1;
            VkQueryPoolCreateInfo queries{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
            queries.queryType = VK_QUERY_TYPE_TIMESTAMP;
            queries.queryCount = Profile::kQueries;
            vk_check(vkCreateQueryPool(device_, &queries, nullptr, &profile_->pool), "vkCreateQueryPool");
        }
    } catch (...) {
        release();
        throw;
    }
}

void VulkanContext::mark(VkCommandBuffer cb, const char* kernel, uint32_t groups_x, uint32_t groups_y,
                         uint32_t groups_z) {
    if (!profile_ || profile_->pending.size() + 1 >= Profile::kQueries) return;
    profile_->pending.push_back(fmt::format("{} [{}x{}x{}]", kernel, groups_x, groups_y, groups_z));
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, profile_->pool,
                        static_cast<uint32_t>(profile_->pending.size()));
}

void VulkanContext::print_profile() const {
    if (!profile_ || profile_->submissions == 0) return;
    const Profile& p = *profile_;
    std::vector<std::pair<std::string, Profile::Row>> rows(p.rows.begin(), p.rows.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    std::string text = fmt::format(
        "Vulkan profile of device {} ({}): {} submissions, {:.3f} ms on the device between their first and last "
        "timestamps, {:.3f} ms from submit to fence, {:.3f} ms recording them, {:.3f} ms on the host between a fence "
        "and the next recording\n{:>10} {:>8} {:>10} {:>6}  kernel [grid]\n",
        info_.index, info_.name, p.submissions, p.device_ns * 1e-6, p.wait_ns * 1e-6, p.record_ns * 1e-6,
        p.host_ns * 1e-6, "ms", "calls", "us/call", "share");
    for (const auto& [name, row] : rows) {
        text += fmt::format("{:10.3f} {:8} {:10.2f} {:5.1f}%  {}\n", row.ns * 1e-6, row.calls,
                            row.ns * 1e-3 / static_cast<double>(row.calls), 100.0 * row.ns / std::max(p.device_ns, 1.0),
                            name);
    }
    std::fputs(text.c_str(), stderr);
}

void VulkanContext::release() {
    if (device_ != VK_NULL_HANDLE) {
        vkDeviceWaitIdle(device_);
        if (profile_ && profile_->pool != VK_NULL_HANDLE) vkDestroyQueryPool(device_, profile_->pool, nullptr);
        if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
        if (pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, pool_, nullptr);
        vkDestroyDevice(device_, nullptr);
    }
    fence_ = VK_NULL_HANDLE;
    pool_ = VK_NULL_HANDLE;
    device_ = VK_NULL_HANDLE;
    instance_ = VK_NULL_HANDLE;
    profile_.reset();
}

VulkanContext::~VulkanContext() {
    print_profile();
    release();
}

const std::string& VulkanContext::subgroup_mismatch() {
    if (!subgroups_probed_) {
        subgroup_mismatch_ = info_.subgroup_shuffle ? probe_subgroups(*this) : "no subgroup shuffles";
        subgroups_probed_ = 1;
    }
    return subgroup_mismatch_;
}

bool VulkanContext::native_fma() {
    if (native_fma_ < 0) native_fma_ = probe_native_fma(*this) ? 1 : 0;
    return native_fma_ == 1;
}

uint32_t VulkanContext::memory_type(uint32_t allowed_bits, VkMemoryPropertyFlags properties) const {
    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
    for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
        if ((allowed_bits & (1u << t)) && (memory.memoryTypes[t].propertyFlags & properties) == properties) return t;
    }
    throw make_error("Vulkan device {} ({}) has no memory of the kind needed (flags {:#x})", info_.index, info_.name,
                     static_cast<unsigned>(properties));
}

VkCommandBuffer VulkanContext::begin() {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    vk_check(vkAllocateCommandBuffers(device_, &alloc, &cb), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
    if (profile_) {
        profile_->began = std::chrono::steady_clock::now();
        if (profile_->submissions > 0) {
            profile_->host_ns += std::chrono::duration<double, std::nano>(profile_->began - profile_->fenced).count();
        }
        profile_->pending.clear();
        vkCmdResetQueryPool(cb, profile_->pool, 0, Profile::kQueries);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, profile_->pool, 0);
    }
    return cb;
}

void VulkanContext::submit_and_wait(VkCommandBuffer cb, uint64_t timeout_ms) {
    struct Free {
        VkDevice d;
        VkCommandPool p;
        VkCommandBuffer c;
        ~Free() { vkFreeCommandBuffers(d, p, 1, &c); }
    } free_it{device_, pool_, cb};
    vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb;
    vk_check(vkResetFences(device_, 1, &fence_), "vkResetFences");
    const auto submitted = std::chrono::steady_clock::now();
    vk_check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
    const VkResult waited = vkWaitForFences(device_, 1, &fence_, VK_TRUE, timeout_ms * 1000000ull);
    if (waited == VK_TIMEOUT) {
        throw make_error("Vulkan device {} ({}) did not finish a kernel within {} ms", info_.index, info_.name, timeout_ms);
    }
    vk_check(waited, "vkWaitForFences");
    if (profile_ && !profile_->pending.empty()) {
        Profile& p = *profile_;
        const size_t n = p.pending.size() + 1;
        std::vector<uint64_t> stamps(n);
        vk_check(vkGetQueryPoolResults(device_, p.pool, 0, static_cast<uint32_t>(n), n * sizeof(uint64_t), stamps.data(),
                                       sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                 "vkGetQueryPoolResults");
        for (size_t i = 1; i < n; ++i) {
            Profile::Row& row = p.rows[p.pending[i - 1]];
            ++row.calls;
            row.ns += static_cast<double>((stamps[i] - stamps[i - 1]) & p.mask) * p.period_ns;
        }
        ++p.submissions;
        p.device_ns += static_cast<double>((stamps[n - 1] - stamps[0]) & p.mask) * p.period_ns;
        p.fenced = std::chrono::steady_clock::now();
        p.wait_ns += std::chrono::duration<double, std::nano>(p.fenced - submitted).count();
        p.record_ns += std::chrono::duration<double, std::nano>(submitted - p.began).count();
    }
}

}  // namespace tessera
