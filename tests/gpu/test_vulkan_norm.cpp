// RMS norm on the Vulkan device against ops/norm.cpp's rms_norm, bit for
// bit: random rows of many widths (sums in double, a rounded mean, a square
// root and a reciprocal each rounded once), tiny and huge magnitudes.
#include "gpu/norm.h"
#include "ops/norm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

namespace tessera {
namespace {

int device_index() {
    const char* v = std::getenv("TESSERA_VULKAN_DEVICE");
    return v != nullptr ? std::atoi(v) : 0;
}

TEST(VulkanRmsNorm, EqualsTheCpuBitForBit) {
    VulkanContext context(device_index());
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

}  // namespace
}  // namespace tessera
