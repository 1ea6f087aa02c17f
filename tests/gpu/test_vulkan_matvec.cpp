// The Vulkan matrix-vector products against the CPU's canonical order, bit
// for bit, on random shapes (odd widths and row counts) and data: F32 against
// f32_dot_canonical, F16 against f16_dot_canonical, Q8_0 and Q4_0 against
// the per-block order of ops/row_groups.h written out here. Runs on whatever device 0 is (lavapipe in CI).
#include "gpu/matvec.h"
#include "ops/float_canonical.h"
#include "ops/kquant_blocks.h"
#include "ops/kquant_scalar.h"
#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/fp16.h"

#include "vulkan_test_device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(VulkanDevices, AreListedWithTheirMemory) {
    const auto devices = vulkan_devices();
    ASSERT_FALSE(devices.empty()) << "no Vulkan device: install mesa-vulkan-drivers (lavapipe)";
    for (const auto& d : devices) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.max_storage_buffer_bytes, 0u);
    }
    EXPECT_THROW({ VulkanContext missing(static_cast<int>(devices.size()) + 3); }, Error);
}

TEST(VulkanDevices, ABufferBeyondTheDeviceIsAClearError) {
    VulkanContext context(test::vulkan_device_index());
    const size_t too_big = context.info().max_storage_buffer_bytes + 1;
    try {
        VulkanBuffer buffer(context, too_big);
        FAIL() << "no error for " << too_big << " bytes";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(std::to_string(too_big)), std::string::npos) << message;
        EXPECT_NE(message.find(context.info().name), std::string::npos) << message;
    }
}

// The block products' variants: an invocation per dot or a workgroup per
// row, each with plain integer sums and, where the device has them (lavapipe
// does), packed dot products.
// (an invocation per dot, packed integer dots, a subgroup per row)
std::vector<std::tuple<bool, bool, bool>> block_variants(VulkanContext& context) {
    std::vector<std::tuple<bool, bool, bool>> v = {{true, false, false}, {false, false, false}};
    if (context.info().integer_dot) v.insert(v.end(), {{true, true, false}, {false, true, false}});
    if (context.subgroup_mismatch().empty()) {  // the subgroups as the products assume (gpu/subgroup_probe.h)
        v.emplace_back(false, false, true);
        if (context.info().integer_dot) v.emplace_back(false, true, true);
    }
    return v;
}

std::string layout_name(bool serial, bool packed, bool by_subgroup) {
    return std::string(serial ? "an invocation per dot" : by_subgroup ? "a subgroup per row" : "a workgroup per row") +
           (packed ? ", packed dots" : "");
}

TEST(VulkanMatvec, F32EqualsTheCanonicalOrderBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    for (const bool serial : {true, false}) {  // an invocation per dot, a workgroup per row
    VulkanMatvec matvec(context, serial);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& [rows, n] : std::vector<std::pair<int, int>>{{1, 1}, {3, 15}, {17, 16}, {65, 33}, {130, 257}, {64, 1024}}) {
        std::vector<float> w(static_cast<size_t>(rows) * static_cast<size_t>(n)), x(static_cast<size_t>(n));
        for (float& v : w) v = normal(rng);
        for (float& v : x) v = normal(rng);
        const std::vector<float> y = matvec.f32(w.data(), rows, n, x.data());
        for (int r = 0; r < rows; ++r) {
            const float expected = f32_dot_canonical(n, w.data() + static_cast<size_t>(r) * static_cast<size_t>(n), x.data());
            ASSERT_TRUE(same_bits(y[static_cast<size_t>(r)], expected))
                << rows << "x" << n << " row " << r << ": " << y[static_cast<size_t>(r)] << " vs " << expected;
        }
    }
    }
}

TEST(VulkanMatvec, Q8_0EqualsTheCanonicalOrderBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    for (const auto& [serial, packed, by_subgroup] : block_variants(context)) {
    VulkanMatvec matvec(context, serial, packed, by_subgroup);
    SCOPED_TRACE(layout_name(serial, packed, by_subgroup));
    const QuantTraits& q8 = require_compute_traits(QuantType::Q8_0, "test");
    std::mt19937 rng(12);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // 16384: 512 blocks a row, two chunks of the workgroup layout's terms.
    for (const auto& [rows, n] : std::vector<std::pair<int, int>>{{1, 32}, {5, 64}, {63, 96}, {129, 2048}, {3, 16384}}) {
        const int blocks = n / 32;
        std::vector<float> wf(static_cast<size_t>(rows) * static_cast<size_t>(n)), xf(static_cast<size_t>(n));
        for (float& v : wf) v = normal(rng);
        for (float& v : xf) v = normal(rng);
        std::vector<BlockQ8_0> w(static_cast<size_t>(rows * blocks)), x(static_cast<size_t>(blocks));
        q8.from_float(wf.data(), w.data(), static_cast<int64_t>(wf.size()));
        q8.from_float(xf.data(), x.data(), n);
        const std::vector<float> y = matvec.q8_0(w.data(), rows, n, x.data());
        for (int r = 0; r < rows; ++r) {
            float acc = 0.0f;
            for (int b = 0; b < blocks; ++b) {
                const BlockQ8_0& wb = w[static_cast<size_t>(r * blocks + b)];
                const BlockQ8_0& xb = x[static_cast<size_t>(b)];
                int32_t s = 0;
                for (int i = 0; i < 32; ++i) s += int32_t{wb.qs[i]} * int32_t{xb.qs[i]};
                acc = std::fma(static_cast<float>(s), fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d), acc);
            }
            ASSERT_TRUE(same_bits(y[static_cast<size_t>(r)], acc))
                << rows << "x" << n << " row " << r << ": " << y[static_cast<size_t>(r)] << " vs " << acc;
        }
    }
    }
}

TEST(VulkanMatvec, F16EqualsTheCanonicalOrderBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    for (const bool serial : {true, false}) {  // an invocation per dot, a workgroup per row
    VulkanMatvec matvec(context, serial);
    std::mt19937 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& [rows, n] : std::vector<std::pair<int, int>>{{1, 1}, {3, 7}, {65, 33}, {130, 257}}) {
        std::vector<uint16_t> w(static_cast<size_t>(rows) * static_cast<size_t>(n));
        std::vector<float> x(static_cast<size_t>(n));
        for (uint16_t& v : w) v = fp32_to_fp16(normal(rng));
        for (float& v : x) v = normal(rng);
        const std::vector<float> y = matvec.f16(w.data(), rows, n, x.data());
        for (int r = 0; r < rows; ++r) {
            const float expected = f16_dot_canonical(n, w.data() + static_cast<size_t>(r) * static_cast<size_t>(n), x.data());
            ASSERT_TRUE(same_bits(y[static_cast<size_t>(r)], expected))
                << rows << "x" << n << " row " << r << ": " << y[static_cast<size_t>(r)] << " vs " << expected;
        }
    }
    }
}

TEST(VulkanMatvec, Q4_0EqualsTheCanonicalOrderBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    for (const auto& [serial, packed, by_subgroup] : block_variants(context)) {
    VulkanMatvec matvec(context, serial, packed, by_subgroup);
    SCOPED_TRACE(layout_name(serial, packed, by_subgroup));
    const QuantTraits& q4 = require_compute_traits(QuantType::Q4_0, "test");
    const QuantTraits& q8 = require_compute_traits(QuantType::Q8_0, "test");
    std::mt19937 rng(14);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& [rows, n] : std::vector<std::pair<int, int>>{{1, 32}, {7, 96}, {129, 2048}}) {
        const int blocks = n / 32;
        std::vector<float> wf(static_cast<size_t>(rows) * static_cast<size_t>(n)), xf(static_cast<size_t>(n));
        for (float& v : wf) v = normal(rng);
        for (float& v : xf) v = normal(rng);
        std::vector<BlockQ4_0> w(static_cast<size_t>(rows * blocks));
        std::vector<BlockQ8_0> x(static_cast<size_t>(blocks));
        q4.from_float(wf.data(), w.data(), static_cast<int64_t>(wf.size()));
        q8.from_float(xf.data(), x.data(), n);
        const std::vector<float> y = matvec.q4_0(w.data(), rows, n, x.data());
        for (int r = 0; r < rows; ++r) {
            float acc = 0.0f;
            for (int b = 0; b < blocks; ++b) {
                const BlockQ4_0& wb = w[static_cast<size_t>(r * blocks + b)];
                const BlockQ8_0& xb = x[static_cast<size_t>(b)];
                int32_t s = 0;
                for (int i = 0; i < 16; ++i) {
                    s += ((wb.qs[i] & 15) - 8) * int32_t{xb.qs[i]} + ((wb.qs[i] >> 4) - 8) * int32_t{xb.qs[i + 16]};
                }
                acc = std::fma(static_cast<float>(s), fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d), acc);
            }
            ASSERT_TRUE(same_bits(y[static_cast<size_t>(r)], acc))
                << rows << "x" << n << " row " << r << ": " << y[static_cast<size_t>(r)] << " vs " << acc;
        }
    }
    }
}

// K-quant rows against Q8_K activations: Q4_K against the order written out
// here from ops/row_groups.h, Q6_K against the CPU's q6_k_vec_dot (its
// canonical block step).
TEST(VulkanMatvec, Q4_KAndQ6_KEqualTheCanonicalOrderBitForBit) {
    VulkanContext context(test::vulkan_device_index());
    for (const auto& [serial, packed, by_subgroup] : block_variants(context)) {
    VulkanMatvec matvec(context, serial, packed, by_subgroup);
    SCOPED_TRACE(layout_name(serial, packed, by_subgroup));
    std::mt19937 rng(15);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& [rows, n] : std::vector<std::pair<int, int>>{{1, 256}, {5, 512}, {67, 2048}}) {
        const int blocks = n / 256;
        std::vector<float> wf(static_cast<size_t>(rows) * static_cast<size_t>(n)), xf(static_cast<size_t>(n));
        for (float& v : wf) v = normal(rng);
        for (float& v : xf) v = normal(rng);
        std::vector<BlockQ4_K> w4(static_cast<size_t>(rows * blocks));
        std::vector<BlockQ6_K> w6(static_cast<size_t>(rows * blocks));
        std::vector<BlockQ8_K> x(static_cast<size_t>(blocks));
        q4_k_from_float(wf.data(), w4.data(), static_cast<int64_t>(wf.size()));
        q6_k_from_float(wf.data(), w6.data(), static_cast<int64_t>(wf.size()));
        q8_k_from_float(xf.data(), x.data(), n);
        const std::vector<float> y4 = matvec.q4_k(w4.data(), rows, n, x.data());
        const std::vector<float> y6 = matvec.q6_k(w6.data(), rows, n, x.data());
        for (int r = 0; r < rows; ++r) {
            float acc = 0.0f;
            for (int b = 0; b < blocks; ++b) {
                const BlockQ4_K& wb = w4[static_cast<size_t>(r * blocks + b)];
                const BlockQ8_K& xb = x[static_cast<size_t>(b)];
                int32_t scaled = 0, mins = 0;
                for (int j = 0; j < 8; ++j) {
                    uint8_t sc, m;
                    q4_k_scale_min(j, wb.scales, &sc, &m);
                    int32_t isum = 0;
                    for (int l = 0; l < 32; ++l) {
                        isum += ((wb.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) * int32_t{xb.qs[32 * j + l]};
                    }
                    scaled += int32_t{sc} * isum;
                    mins += int32_t{m} * (int32_t{xb.bsums[2 * j]} + int32_t{xb.bsums[2 * j + 1]});
                }
                const float block = std::fma(-fp16_to_fp32(wb.dmin), static_cast<float>(mins),
                                             fp16_to_fp32(wb.d) * static_cast<float>(scaled));
                acc = std::fma(xb.d, block, acc);
            }
            ASSERT_TRUE(same_bits(y4[static_cast<size_t>(r)], acc))
                << "Q4_K " << rows << "x" << n << " row " << r << ": " << y4[static_cast<size_t>(r)] << " vs " << acc;
            const float q6 = q6_k_vec_dot(n, w6.data() + static_cast<size_t>(r * blocks), x.data());
            ASSERT_TRUE(same_bits(y6[static_cast<size_t>(r)], q6))
                << "Q6_K " << rows << "x" << n << " row " << r << ": " << y6[static_cast<size_t>(r)] << " vs " << q6;
        }
    }
    }
}

}  // namespace
}  // namespace tessera
