// The shaders' correctly rounded helpers (src/gpu/shaders/exact_fma.glsl,
// exact_math.glsl) against the CPU's IEEE operations, bit for bit, on random
// values over many magnitudes and on values next to ties: fma rounded once,
// float sqrt, float reciprocal, and a double quotient rounded to float.
#include "gpu/fma_probe.h"
#include "gpu/matvec.h"
#include "gpu/shaders.h"
#include "gpu/subgroup_probe.h"
#include "gpu/vulkan_kernel.h"
#include "ops/float_canonical.h"
#include "util/error.h"

#include "vulkan_test_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace tessera::shaders {
extern const uint32_t k_exact_math_check[];
extern const size_t k_exact_math_check_words;
}  // namespace tessera::shaders

namespace tessera {
namespace {

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(VulkanExactMath, HelpersRoundOnceAsTheCpuDoes) {
    VulkanContext context(test::vulkan_device_index());
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
    VulkanContext context(test::vulkan_device_index());
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
    {
        // One token's block products a subgroup per row: only when asked on
        // a CPU device (lavapipe), and then only where the probe passes.
        VulkanContext e(0);
        EXPECT_FALSE(subgroup_rows(e)) << "dots";
        setenv("TESSERA_VULKAN_PRODUCTS", "rows", 1);
        EXPECT_FALSE(subgroup_rows(e)) << "rows";
        unsetenv("TESSERA_VULKAN_PRODUCTS");
        EXPECT_EQ(subgroup_rows(e), e.info().type != "cpu" && e.subgroup_mismatch().empty()) << "default";
        setenv("TESSERA_VULKAN_PRODUCTS", "subgroups", 1);
        EXPECT_FALSE(serial_products(e.info()));
        if (e.subgroup_mismatch().empty()) {
            EXPECT_TRUE(subgroup_rows(e));
        } else {
            EXPECT_THROW(subgroup_rows(e), Error);
        }
    }
    {
        // Tiles: every block product when asked; prompts by default.
        VulkanContext e(0);
        EXPECT_EQ(tiled_products(), ProductTiles::kNone) << "subgroups";
        setenv("TESSERA_VULKAN_PRODUCTS", "tiles", 1);
        EXPECT_EQ(tiled_products(), ProductTiles::kEvery);
        EXPECT_FALSE(serial_products(e.info()));
        EXPECT_FALSE(subgroup_rows(e));
        unsetenv("TESSERA_VULKAN_PRODUCTS");
        EXPECT_EQ(tiled_products(), ProductTiles::kPrompts);
        // The tile's shape: 2 x 4, or as asked, each 1 to 16.
        EXPECT_EQ(product_tile().dots, 2u);
        EXPECT_EQ(product_tile().tokens, 4u);
        setenv("TESSERA_VULKAN_TILE", "3x16", 1);
        EXPECT_EQ(product_tile().dots, 3u);
        EXPECT_EQ(product_tile().tokens, 16u);
        EXPECT_EQ(tile_groups(100, 1), 5u);  // 24 dots a workgroup
        EXPECT_EQ(tile_token_groups(129), 2u);  // 128 tokens a workgroup
        for (const char* bad : {"0x4", "2x17", "2x", "x4", "2x4x", "4", "-1x4", "2 x 4"}) {
            setenv("TESSERA_VULKAN_TILE", bad, 1);
            EXPECT_THROW(product_tile(), Error) << bad;
        }
        unsetenv("TESSERA_VULKAN_TILE");
    }
    setenv("TESSERA_VULKAN_PRODUCTS", "threads", 1);
    EXPECT_THROW(tiled_products(), Error);
    EXPECT_THROW(serial_products(VulkanContext(0).info()), Error);
    {
        VulkanContext f(0);
        EXPECT_THROW(subgroup_rows(f), Error);
    }
    unsetenv("TESSERA_VULKAN_PRODUCTS");
    if (saved.empty()) {
        unsetenv("TESSERA_VULKAN_FMA");
    } else {
        setenv("TESSERA_VULKAN_FMA", saved.c_str(), 1);
    }
}
}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The instructions of a SPIR-V module, as (opcode, operands).
std::vector<std::vector<uint32_t>> instructions(const std::vector<uint32_t>& m) {
    std::vector<std::vector<uint32_t>> out;
    for (size_t i = 5; i < m.size();) {
        const uint32_t count = m[i] >> 16;
        EXPECT_GT(count, 0u);
        EXPECT_LE(i + count, m.size());
        if (count == 0 || i + count > m.size()) break;
        out.emplace_back(m.begin() + static_cast<std::ptrdiff_t>(i), m.begin() + static_cast<std::ptrdiff_t>(i + count));
        i += count;
    }
    return out;
}

// DenormPreserve added to a real shader (devices that flush subnormals by
// default, NVIDIA's, keep them with it): the capability among the
// capabilities, the extension after them, the mode for 32-bit floats on the
// entry point, every original instruction kept in order; a module that is
// not SPIR-V, or is cut, is refused.
TEST(VulkanDenormPreserve, TheModeIsAddedToTheEntryPointAndNothingElseChanges) {
    const std::vector<uint32_t> original(shaders::k_rms_norm, shaders::k_rms_norm + shaders::k_rms_norm_words);
    const std::vector<uint32_t> patched = with_denorm_preserve(original.data(), original.size());
    ASSERT_EQ(patched.size(), original.size() + 2 + 7 + 4);
    EXPECT_TRUE(std::equal(original.begin(), original.begin() + 5, patched.begin()));
    const auto before = instructions(original), after = instructions(patched);
    ASSERT_EQ(after.size(), before.size() + 3);
    size_t capabilities = 0;
    while ((after[capabilities][0] & 0xffffu) == 17u) ++capabilities;
    EXPECT_EQ(after[capabilities - 1], (std::vector<uint32_t>{(2u << 16) | 17u, 4464u}));
    ASSERT_EQ(after[capabilities][0] & 0xffffu, 10u);  // OpExtension
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(after[capabilities].data() + 1)), "SPV_KHR_float_controls");
    uint32_t entry = 0;
    size_t mode = 0;
    for (size_t i = 0; i < after.size(); ++i) {
        if ((after[i][0] & 0xffffu) == 15u) entry = after[i][2];
        if ((after[i][0] & 0xffffu) == 16u && after[i][2] == 4459u) mode = i;
    }
    ASSERT_NE(mode, 0u);
    EXPECT_EQ(after[mode], (std::vector<uint32_t>{(4u << 16) | 16u, entry, 4459u, 32u}));
    std::vector<std::vector<uint32_t>> kept;
    for (size_t i = 0; i < after.size(); ++i) {
        if (i != capabilities - 1 && i != capabilities && i != mode) kept.push_back(after[i]);
    }
    EXPECT_EQ(kept, before);
    EXPECT_THROW(with_denorm_preserve(original.data(), 3), Error);
    // Cut inside its first instruction of three words or more (OpEntryPoint, say).
    size_t at = 5;
    while ((original[at] >> 16) < 3) at += original[at] >> 16;
    EXPECT_THROW(with_denorm_preserve(original.data(), at + 2), Error);
    std::vector<uint32_t> not_spirv = original;
    not_spirv[0] = 0;
    EXPECT_THROW(with_denorm_preserve(not_spirv.data(), not_spirv.size()), Error);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The fma probe's verdict: std::fma's bits pass; an unfused multiply-add
// fails; subnormal results flushed to zero pass only where the device does
// not promise to keep subnormals (there the emulated fma flushes them too).
TEST(VulkanFmaProbe, SubnormalsCountOnlyWhereTheDeviceKeepsThem) {
    const std::vector<float> cases = fma_probe_cases();
    const size_t n = cases.size() / 3;
    std::vector<float> fused(n), unfused(n), flushed(n);
    bool any_subnormal = false;
    for (size_t i = 0; i < n; ++i) {
        const float a = cases[3 * i], b = cases[3 * i + 1], c = cases[3 * i + 2];
        fused[i] = std::fma(a, b, c);
        volatile float product = a * b;
        unfused[i] = product + c;
        const bool tiny = fused[i] != 0.0f && std::fabs(fused[i]) < std::numeric_limits<float>::min();
        any_subnormal = any_subnormal || tiny;
        flushed[i] = tiny ? std::copysign(0.0f, fused[i]) : fused[i];
    }
    ASSERT_TRUE(any_subnormal) << "the probe has subnormal results";
    EXPECT_TRUE(fma_results_round_once(cases, fused, true));
    EXPECT_TRUE(fma_results_round_once(cases, fused, false));
    EXPECT_FALSE(fma_results_round_once(cases, unfused, true));
    EXPECT_FALSE(fma_results_round_once(cases, unfused, false));
    EXPECT_FALSE(fma_results_round_once(cases, flushed, true));
    EXPECT_TRUE(fma_results_round_once(cases, flushed, false));
}

}  // namespace
}  // namespace tessera
