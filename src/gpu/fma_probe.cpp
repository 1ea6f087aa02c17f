#include "gpu/fma_probe.h"

#include "gpu/shaders.h"
#include "gpu/vulkan_kernel.h"
#include "util/error.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
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

bool fma_results_round_once(const std::vector<float>& cases, const std::vector<float>& got, bool keeps_subnormals) {
    // A device that may flush subnormals (no DenormPreserve) flushes them in
    // the emulated fma too (its conversions between float and double), so
    // there only normal values are asked to round once.
    const auto subnormal = [](float v) { return v != 0.0f && std::fabs(v) < std::numeric_limits<float>::min(); };
    for (size_t i = 0; i < got.size(); ++i) {
        const float a = cases[3 * i], b = cases[3 * i + 1], c = cases[3 * i + 2];
        const float want = std::fma(a, b, c);
        if (!keeps_subnormals && (subnormal(a) || subnormal(b) || subnormal(c) || subnormal(want))) continue;
        if (std::memcmp(&want, &got[i], 4) != 0) return false;
    }
    return true;
}

std::vector<float> fma_probe_cases() { return probe_cases(); }

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
    return fma_results_round_once(cases, got, context.info().denorm_preserve);
}

}  // namespace tessera
