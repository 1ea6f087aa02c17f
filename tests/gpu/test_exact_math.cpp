// The shaders' correctly rounded helpers (src/gpu/shaders/exact_fma.glsl,
// exact_math.glsl) against the CPU's IEEE operations, bit for bit, on random
// values over many magnitudes and on values next to ties: fma rounded once,
// float sqrt, float reciprocal, and a double quotient rounded to float.
#include "gpu/matvec.h"
#include "gpu/shaders.h"
#include "gpu/subgroup_probe.h"
#include "gpu/vulkan_kernel.h"
#include "ops/float_canonical.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tessera::shaders {
extern const uint32_t k_exact_math_check[];
extern const size_t k_exact_math_check_words;
}  // namespace tessera::shaders

namespace tessera {
namespace {

int device_index() {
    const char* v = std::getenv("TESSERA_VULKAN_DEVICE");
    return v != nullptr ? std::atoi(v) : 0;
}

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(VulkanExactMath, HelpersRoundOnceAsTheCpuDoes) {
    VulkanContext context(device_index());
    VulkanKernel kernel(context, shaders::k_exact_math_check, shaders::k_exact_math_check_words, 2, 4, "exact_math_check");
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-40, 40);
    const uint32_t n = 20000;
    std::vector<float> in(2 * n);
    for (uint32_t i = 0; i < n; ++i) {
        float a = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
        float b = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
        if (i % 4 == 0) {
            // b = 1 + k ulp: products near representable values, ties for fma.
            b = 1.0f + std::ldexp(static_cast<float>(rng() % 8), -23);
            a = std::ldexp(1.0f + std::ldexp(static_cast<float>(rng() % 1024), -23), exponent(rng) / 4);
        }
        in[2 * i] = a;
        in[2 * i + 1] = b;
    }
    VulkanBuffer ib(context, in.size() * 4), ob(context, static_cast<size_t>(n) * 16);
    ib.upload(in.data(), in.size() * 4);
    kernel.run({&ib, &ob}, &n, (n + 63) / 64);
    std::vector<float> out(static_cast<size_t>(n) * 4);
    ob.download(out.data(), out.size() * 4);
    for (uint32_t i = 0; i < n; ++i) {
        const float a = in[2 * i], b = in[2 * i + 1];
        const float fma_cpu = std::fma(a, b, a * 0.5f);
        const float sqrt_cpu = std::sqrt(std::fabs(a));
        const float recip_cpu = 1.0f / std::fabs(a);
        const double scaled = static_cast<double>(a) * 9.5367431640625e-07 + static_cast<double>(b);
        const float div_cpu = static_cast<float>(scaled / (static_cast<double>(std::fabs(b)) + 3.0));
        ASSERT_TRUE(same(out[4 * i], fma_cpu)) << "fma(" << a << ", " << b << ")";
        ASSERT_TRUE(same(out[4 * i + 1], sqrt_cpu)) << "sqrt(" << a << ")";
        ASSERT_TRUE(same(out[4 * i + 2], recip_cpu)) << "1 / " << a;
        ASSERT_TRUE(same(out[4 * i + 3], div_cpu)) << a << ", " << b;
    }
}

// The subgroup probe (gpu/subgroup_probe.h) on this device agrees with the
// device's own report where they agree (lavapipe's default width), and a
// forged report with a lane out of place, a shuffle from the wrong lane or
// an inconsistent count of subgroups is named.
TEST(VulkanSubgroupProbe, NamesWhatDiffersFromTheAssumedSubgroups) {
    VulkanContext context(device_index());
    if (!context.info().subgroup_shuffle) GTEST_SKIP() << "no subgroup shuffles";
    const std::string& verdict = context.subgroup_mismatch();
    if (std::getenv("LP_NATIVE_VECTOR_WIDTH") == nullptr) EXPECT_EQ(verdict, "") << context.info().name;
    const uint32_t size = 8, n = 128;
    std::vector<uint32_t> words(static_cast<size_t>(n) * kSubgroupProbeWords);
    for (uint32_t i = 0; i < n; ++i) {
        uint32_t* v = words.data() + static_cast<size_t>(i) * kSubgroupProbeWords;
        const uint32_t lane = i % size, first = i - lane;
        v[0] = size, v[1] = lane, v[2] = (i % 64) / size, v[3] = 64 / size;
        uint32_t k = 4;
        for (uint32_t d = 1; d < 64; d *= 2, ++k) v[k] = d < size ? first + (lane ^ d) : 0xffffffffu;
        for (uint32_t src = 0; src < 64; ++src, ++k) v[k] = src < size ? first + src : 0xffffffffu;
    }
    EXPECT_EQ(subgroup_probe_mismatch(words, n), "");
    auto forged = words;
    forged[static_cast<size_t>(70) * kSubgroupProbeWords + 3] = 4;  // 4 subgroups of 8 in 64
    EXPECT_NE(subgroup_probe_mismatch(forged, n).find("invocation 70 is lane 6 of subgroup 0 of 4"), std::string::npos)
        << subgroup_probe_mismatch(forged, n);
    forged = words;
    forged[static_cast<size_t>(9) * kSubgroupProbeWords + 4 + 2] = 9;  // xor 4 read itself
    EXPECT_NE(subgroup_probe_mismatch(forged, n).find("xor 4 in invocation 9 read invocation 9"), std::string::npos);
    forged = words;
    forged[static_cast<size_t>(17) * kSubgroupProbeWords + 4 + 6 + 5] = 16;  // lane 5's value from lane 0
    EXPECT_NE(subgroup_probe_mismatch(forged, n).find("from lane 5 in invocation 17 read invocation 16"),
              std::string::npos);
    forged = words;
    forged[0] = 48;
    EXPECT_EQ(subgroup_probe_mismatch(forged, n), "a subgroup size of 48");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {
// The kernels take the device's own fma only where it rounds once on every
// probe case; TESSERA_VULKAN_FMA forces either way. (Every kernel test runs
// under the probe's verdict; the emulated path under the override too.)
TEST(VulkanFmaProbe, DecidesOnceAndHonoursTheOverrides) {
    const char* was = std::getenv("TESSERA_VULKAN_FMA");
    const std::string saved = was != nullptr ? was : "";
    unsetenv("TESSERA_VULKAN_FMA");
    {
        VulkanContext a(0), b(0);
        EXPECT_EQ(a.native_fma(), b.native_fma());
    }
    setenv("TESSERA_VULKAN_FMA", "emulate", 1);
    {
        VulkanContext c(0);
        EXPECT_FALSE(c.native_fma());
        VulkanMatvec matvec(c, true);
        const float w[3] = {1.0f + 0x1p-12f, 3.0f, -2.5f}, x[3] = {1.0f - 0x1p-12f, 0x1p-30f, 7.0f};
        const std::vector<float> y = matvec.f32(w, 1, 3, x);
        EXPECT_EQ(y[0], f32_dot_canonical(3, w, x));
    }
    setenv("TESSERA_VULKAN_FMA", "bogus", 1);
    {
        VulkanContext d(0);
        EXPECT_THROW(d.native_fma(), Error);
    }
    // The products' layout switch: either layout or a clear error.
    setenv("TESSERA_VULKAN_PRODUCTS", "rows", 1);
    EXPECT_FALSE(serial_products(VulkanContext(0).info()));
    setenv("TESSERA_VULKAN_PRODUCTS", "dots", 1);
    EXPECT_TRUE(serial_products(VulkanContext(0).info()));
    setenv("TESSERA_VULKAN_PRODUCTS", "threads", 1);
    EXPECT_THROW(serial_products(VulkanContext(0).info()), Error);
    unsetenv("TESSERA_VULKAN_PRODUCTS");
    if (saved.empty()) {
        unsetenv("TESSERA_VULKAN_FMA");
    } else {
        setenv("TESSERA_VULKAN_FMA", saved.c_str(), 1);
    }
}
}  // namespace
}  // namespace tessera
