// RMS norm on the Vulkan device against ops/norm.cpp's rms_norm, bit for
// bit: random rows of many widths (sums in double, a rounded mean, a square
// root and a reciprocal each rounded once), tiny and huge magnitudes.
#include "gpu/norm.h"
#include "ops/kquant_scalar.h"
#include "ops/kquant_blocks.h"
#include "gpu/vulkan_kernel.h"
#include "gpu/shaders.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/softmax.h"

#include "vulkan_test_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cmath>
#include <cstring>
#include <random>
#include <regex>

namespace tessera {
namespace {

TEST(VulkanRmsNorm, EqualsTheCpuBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    VulkanRmsNorm norm(context);
    std::mt19937 rng(21);
    for (const float magnitude : {1.0f, 1e-3f, 300.0f}) {
        std::normal_distribution<float> normal(0.0f, magnitude);
        for (const int n : {1, 7, 64, 255, 2048, 4096}) {
            const int rows = 37;
            std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(n)), w(static_cast<size_t>(n));
            for (float& v : x) v = normal(rng);
            for (float& v : w) v = 1.0f + 0.1f * std::normal_distribution<float>(0.0f, 1.0f)(rng);
            const float eps = 1e-5f;
            const std::vector<float> gpu = norm.run(x.data(), rows, n, w.data(), eps);
            std::vector<float> cpu(static_cast<size_t>(n));
            for (int r = 0; r < rows; ++r) {
                rms_norm(x.data() + static_cast<size_t>(r) * static_cast<size_t>(n), w.data(), n, eps, cpu.data());
                ASSERT_EQ(std::memcmp(cpu.data(), gpu.data() + static_cast<size_t>(r) * static_cast<size_t>(n),
                                      cpu.size() * 4),
                          0)
                    << "n " << n << " magnitude " << magnitude << " row " << r;
            }
        }
    }
}

// TESSERA_VULKAN_PROFILE: each dispatch's device time is summed under its
// kernel and grid, and the table goes to stderr when the context ends; the
// figures are the device's own timestamps (nothing here asserts a speed).
TEST(VulkanProfile, TheContextPrintsEachKernelsDispatchesWhenItEnds) {
    ::setenv("TESSERA_VULKAN_PROFILE", "1", 1);
    testing::internal::CaptureStderr();
    {
        VulkanContext context(test::vulkan_device_index());
        VulkanRmsNorm norm(context);
        const int rows = 5, n = 300;
        std::vector<float> x(static_cast<size_t>(rows * n), 0.5f), w(static_cast<size_t>(n), 1.0f);
        for (int i = 0; i < 3; ++i) norm.run(x.data(), rows, n, w.data(), 1e-5f);
    }
    const std::string text = testing::internal::GetCapturedStderr();
    ::unsetenv("TESSERA_VULKAN_PROFILE");
    EXPECT_NE(text.find("Vulkan profile of device"), std::string::npos) << text;
    // ms, calls, us/call, share, kernel [grid]: three calls of the norm.
    EXPECT_TRUE(std::regex_search(text, std::regex(R"(\n +[0-9.]+ +3 +[0-9.]+ +[0-9.]+%  rms_norm \[5x1x1\]\n)")))
        << text;
    testing::internal::CaptureStderr();
    { VulkanContext quiet(test::vulkan_device_index()); }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "no table without the variable";
}

// Float rows to Q8_K blocks on the device (a workgroup per block) against
// the CPU's q8_k_from_float, byte for byte: random blocks, a block of zeros,
// blocks whose largest magnitude comes twice with both signs (the first one
// sets the sign of the scale), a largest element at each end, subnormals.
TEST(VulkanQuantizeQ8K, EqualsTheCpuByteForByte) {
    VulkanContext context(test::vulkan_device_index());
    VulkanKernel kernel(context, TESSERA_SPIRV(quantize_q8_k), 2, 4, "quantize_q8_k");
    std::mt19937 rng(23);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const uint32_t blocks = 9;
    std::vector<float> x(256 * blocks);
    for (float& v : x) v = normal(rng);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);   // block 1: zeros
    x[2 * 256 + 10] = 7.5f, x[2 * 256 + 200] = -7.5f;     // block 2: +max first
    x[3 * 256 + 3] = -7.5f, x[3 * 256 + 4] = 7.5f;        // block 3: -max first, neighbours in one invocation
    x[4 * 256 + 0] = -9.0f;                               // block 4: the first element
    x[5 * 256 + 255] = 9.0f;                              // block 5: the last one
    for (int i = 0; i < 256; ++i) x[6 * 256 + i] = std::ldexp(normal(rng), -130);  // block 6: subnormals
    x[7 * 256 + 64] = -3.0f, x[7 * 256 + 192] = 3.0f, x[7 * 256 + 128] = -3.0f;   // block 7: ties across invocations
    VulkanBuffer xb(context, x.size() * 4), qb(context, blocks * 292);
    xb.upload(x.data(), x.size() * 4);
    kernel.run({&xb, &qb}, &blocks, blocks);
    std::vector<BlockQ8_K> gpu(blocks), cpu(blocks);
    qb.download(gpu.data(), blocks * 292);
    q8_k_from_float(x.data(), cpu.data(), static_cast<int64_t>(x.size()));
    for (uint32_t b = 0; b < blocks; ++b) {
        EXPECT_EQ(std::memcmp(&gpu[b], &cpu[b], 292), 0) << "block " << b << ": d " << gpu[b].d << " vs " << cpu[b].d;
    }
}

TEST(VulkanSwiglu, EqualsTheCpuBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    VulkanGate swiglu(context, FfnActivation::kSilu);
    std::mt19937 rng(22);
    const int n = 50000;
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    // Gates over the whole range the exponential sees: saturated, tiny,
    // near the clamps (+-87, 88) and ordinary.
    std::uniform_real_distribution<float> wide(-100.0f, 100.0f), narrow(-6.0f, 6.0f);
    for (int i = 0; i < n; ++i) {
        gate[static_cast<size_t>(i)] = i % 3 == 0 ? wide(rng) : narrow(rng);
        up[static_cast<size_t>(i)] = narrow(rng);
    }
    for (const float edge : {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 86.99f, -86.99f, 1e-30f, -1e-30f}) {
        gate.push_back(edge);
        up.push_back(1.5f);
    }
    const std::vector<float> gpu = swiglu.run(gate.data(), up.data(), static_cast<int>(gate.size()));
    std::vector<float> cpu = gate;
    tessera::swiglu(cpu.data(), up.data(), static_cast<int64_t>(cpu.size()));
    for (size_t i = 0; i < cpu.size(); ++i) {
        ASSERT_EQ(std::memcmp(&cpu[i], &gpu[i], 4), 0) << "gate " << gate[i] << ": " << cpu[i] << " vs " << gpu[i];
    }
}

// GELU's tanh form and the soft cap run Highway's Tanh (expm1 by its own
// polynomial): over the whole range, its branches (|x| < ln 2 / 2, the
// saturation beyond 18.7, expm1's floor at -104), zeros and tiny values.
TEST(VulkanGeluAndSoftCap, EqualTheCpuBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    VulkanGate geglu(context, FfnActivation::kGelu);
    VulkanSoftCap cap(context);
    std::mt19937 rng(25);
    std::uniform_real_distribution<float> wide(-60.0f, 60.0f), narrow(-2.0f, 2.0f), tiny(-0.2f, 0.2f);
    std::vector<float> x, up;
    for (int i = 0; i < 60000; ++i) {
        x.push_back(i % 3 == 0 ? wide(rng) : i % 3 == 1 ? narrow(rng) : tiny(rng));
        up.push_back(narrow(rng));
    }
    for (const float edge : {0.0f, -0.0f, 0.3465f, -0.3466f, 9.357f, 18.714973875f, 18.72f, -52.0f, 1e-30f, -1e-30f}) {
        x.push_back(edge);
        up.push_back(1.25f);
    }
    const std::vector<float> gpu = geglu.run(x.data(), up.data(), static_cast<int>(x.size()));
    std::vector<float> cpu = x;
    tessera::geglu(cpu.data(), up.data(), static_cast<int64_t>(cpu.size()));
    for (size_t i = 0; i < cpu.size(); ++i) {
        ASSERT_EQ(std::memcmp(&cpu[i], &gpu[i], 4), 0) << "gelu of " << x[i] << ": " << cpu[i] << " vs " << gpu[i];
    }
    for (const float c : {50.0f, 30.0f}) {
        std::vector<float> scores = x;
        for (float& v : scores) v *= 3.0f;
        const std::vector<float> capped = cap.run(scores.data(), static_cast<int>(scores.size()), c);
        std::vector<float> want = scores;
        tessera::soft_cap(want.data(), static_cast<int64_t>(want.size()), c);
        for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(std::memcmp(&want[i], &capped[i], 4), 0) << "cap " << c << " of " << scores[i];
        }
    }
}

TEST(VulkanRope, EqualsTheCpuBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    VulkanRope rope(context);
    std::mt19937 rng(23);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (const RopeLayout layout : {RopeLayout::kAdjacent, RopeLayout::kHalves}) {
        for (const auto& [n_rot, head_dim] : std::vector<std::pair<int, int>>{{64, 64}, {128, 128}, {32, 64}}) {
            RopeTable table(n_rot, 10000.0f, {}, layout);
            for (const int64_t pos : {0, 1, 17, 4095, 131071}) {
                table.set_position(pos);
                const int heads = 6;
                std::vector<float> x(static_cast<size_t>(heads * head_dim));
                for (float& v : x) v = normal(rng);
                const std::vector<float> gpu = rope.run(x.data(), heads, head_dim, table);
                table.apply(x.data(), heads, head_dim);
                ASSERT_EQ(std::memcmp(x.data(), gpu.data(), x.size() * 4), 0)
                    << "n_rot " << n_rot << " head_dim " << head_dim << " pos " << pos;
            }
        }
    }
}

TEST(VulkanSoftmax, EqualsTheCpuBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    VulkanSoftmax softmax(context);
    std::mt19937 rng(24);
    for (const float spread : {0.1f, 3.0f, 40.0f}) {
        std::normal_distribution<float> normal(0.0f, spread);
        for (const int n : {1, 5, 16, 17, 100, 4096}) {
            const int rows = 19;
            std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(n));
            for (float& v : x) v = normal(rng);
            const std::vector<float> gpu = softmax.run(x.data(), rows, n);
            for (int r = 0; r < rows; ++r) tessera::softmax(x.data() + static_cast<size_t>(r) * static_cast<size_t>(n), n);
            ASSERT_EQ(std::memcmp(x.data(), gpu.data(), x.size() * 4), 0) << "n " << n << " spread " << spread;
        }
    }
}

}  // namespace
}  // namespace tessera
