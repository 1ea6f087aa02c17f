// tessera devices: what this machine can compute on: the CPU's SIMD target,
// and the Vulkan devices when the binary has the Vulkan backend.
#include "apps/commands.h"
#include "ops/cpu_target.h"

#ifdef TESSERA_VULKAN
#include "gpu/vulkan_context.h"
#endif

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace tessera {

#ifdef TESSERA_VULKAN
namespace {
// Whether the kernels use the device's own fma (gpu/fma_probe.h); null where
// the device cannot be opened.
nlohmann::json native_fma_of(const VulkanDeviceInfo& d) {
    if (!d.shader_float64) return nullptr;
    try {
        VulkanContext context(d.index);
        return context.native_fma();
    } catch (const Error&) {
        return nullptr;
    }
}
}  // namespace
#endif

void add_devices_command(CLI::App& app) {
    auto json = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand("devices", "List what this machine computes on: the CPU and its SIMD target, "
                                                  "and the Vulkan devices (lavapipe, a software one, included)");
    cmd->add_flag("--json", *json, "One JSON object");
    cmd->callback([json] {
        nlohmann::json out = {{"cpu", {{"target", cpu_target_name()}, {"targets", cpu_target_names()}}}};
#ifdef TESSERA_VULKAN
        out["vulkan"] = nlohmann::json::array();
        for (const VulkanDeviceInfo& d : vulkan_devices()) {
            out["vulkan"].push_back({{"index", d.index},
                                     {"name", d.name},
                                     {"type", d.type},
                                     {"device_local_bytes", d.device_local_bytes},
                                     {"max_storage_buffer_bytes", d.max_storage_buffer_bytes},
                                     {"subgroup_size", d.subgroup_size},
                                     {"subgroup_shuffle", d.subgroup_shuffle},
                                     {"float64", d.shader_float64},
                                     {"integer_dot", d.integer_dot},
                                     {"integer_dot_accelerated", d.integer_dot_accelerated},
                                     {"denorm_preserve", d.denorm_preserve},
                                     {"native_fma", native_fma_of(d)}});
        }
#else
        out["vulkan"] = nullptr;
#endif
        if (*json) {
            std::printf("%s\n", out.dump().c_str());
            return;
        }
        std::printf("cpu: SIMD target %s\n", cpu_target_name().c_str());
#ifdef TESSERA_VULKAN
        if (out["vulkan"].empty()) std::printf("vulkan: no device (no driver installed?)\n");
        for (const auto& d : out["vulkan"]) {
            const char* dot = !d["integer_dot"].get<bool>()                ? "none"
                              : d["integer_dot_accelerated"].get<bool>() ? "packed, accelerated"
                                                                          : "packed, not accelerated";
            std::printf("vulkan:%d %s (%s), %.1f GiB device memory, buffers up to %.0f MiB, subgroups of %d, fma %s, "
                        "integer dot %s, subnormals %s%s\n",
                        d["index"].get<int>(), d["name"].get<std::string>().c_str(), d["type"].get<std::string>().c_str(),
                        d["device_local_bytes"].get<double>() / (1 << 30),
                        d["max_storage_buffer_bytes"].get<double>() / (1 << 20), d["subgroup_size"].get<int>(),
                        d["native_fma"].is_null() ? "?" : d["native_fma"].get<bool>() ? "native" : "emulated from doubles",
                        dot, d["denorm_preserve"].get<bool>() ? "kept" : "may be flushed to zero (no DenormPreserve)",
                        d["float64"].get<bool>() ? "" : "; no 64-bit floats: its kernels cannot round as the CPU does");
        }
#else
        std::printf("vulkan: this binary was built without the Vulkan backend (install libvulkan-dev and glslc, "
                    "then build again)\n");
#endif
    });
}

}  // namespace tessera
