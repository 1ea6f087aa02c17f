#include "gpu/fma_probe.h"

#include "gpu/shaders.h"
#include "gpu/vulkan_kernel.h"
#include "util/error.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tessera {

namespace {

std::vector<float> probe_cases() {
    std::vector<float> v;
    const auto add = [&](float a, float b, float c) { v.insert(v.end(), {a, b, c}); };
    std::mt19937 rng(20261128);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-60, 60);
    for (int i = 0; i < 4096; ++i) {
        const float a = std::ldexp(unit(rng), exponent(rng)), b = std::ldexp(unit(rng), exponent(rng));
        add(a, b, -(a * b));                                       // the product's rounding error
        add(a, b, std::ldexp(unit(rng), exponent(rng)));           // anything
        add(a, b, -(a * b) * (1.0f + std::ldexp(unit(rng), -20)));  // near cancellation
    }
    // Ties of the sum, subnormal results and signed zeros.
    add(1.0f + 0x1p-23f, 1.0f + 0x1p-23f, -1.0f);
    add(1.0f + 0x1p-12f, 1.0f - 0x1p-12f, -1.0f);
    add(0x1p-70f, 0x1p-70f, 0.0f);
    add(0x1p-100f, 0x1p-40f, -0x1p-140f);
    add(1e-20f, -1e-20f, 0.0f);
    add(-0.0f, 1.0f, 0.0f);
    add(3.0f, 0x1p-24f, 1.0f);
    return v;
}

}  // namespace

bool probe_native_fma(VulkanContext& context) {
    if (const char* forced = std::getenv("TESSERA_VULKAN_FMA"); forced != nullptr && *forced != '\0') {
        const std::string mode = forced;
        if (mode == "emulate") return false;
        if (mode == "native") return true;
        throw make_error("TESSERA_VULKAN_FMA={}: emulate or native", mode);
    }
    const std::vector<float> cases = probe_cases();
    const auto n = static_cast<uint32_t>(cases.size() / 3);
    VulkanBuffer in(context, cases.size() * 4), out(context, static_cast<size_t>(n) * 4);
    in.upload(cases.data(), cases.size() * 4);
    VulkanKernel kernel(context, TESSERA_SPIRV(fma_probe), 2, 4, "fma_probe", false);
    kernel.run({&in, &out}, &n, (n + 63) / 64);
    std::vector<float> got(n);
    out.download(got.data(), got.size() * 4);
    for (uint32_t i = 0; i < n; ++i) {
        const float want = std::fma(cases[3 * i], cases[3 * i + 1], cases[3 * i + 2]);
        if (std::memcmp(&want, &got[i], 4) != 0) return false;
    }
    return true;
}

}  // namespace tessera
