// Every SIMD kernel of simd_block_traits (F32, F16, Q8_0, Q4_0: vec_dot,
// vec_dot_tile, to_float) against its scalar reference, on every compiled
// target this CPU supports, on random data including the extreme codes
// (-128 in Q8_0 weights), odd block counts, unaligned buffers and odd tile
// shapes.
#include "ops/dot_kernels.h"
#include "util/rng.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

template <typename Body>
void for_each_target(Body body) {
    const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
    ASSERT_FALSE(targets.empty());
    for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        body(hwy::TargetName(target));
    }
    hwy::SetSupportedTargetsForTest(0);
}

// A row of n elements of `type` in random valid bytes: quantized from random
// floats, then (for Q8_0 weights) some codes forced to the extremes.
std::vector<uint8_t> random_row(QuantType type, int64_t n, Rng& rng, bool extremes, size_t offset) {
    const QuantTraits& ref = *scalar_traits(type);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = rng.next_normal();
    std::vector<uint8_t> bytes(offset + quant_row_bytes(type, n));
    ref.from_float(x.data(), bytes.data() + offset, n);
    if (extremes && type == QuantType::Q8_0) {
        for (int64_t b = 0; b < n / 32; ++b) {
            uint8_t* qs = bytes.data() + offset + b * 34 + 2;
            qs[rng.next_u64() % 32] = 0x80;  // -128
            qs[rng.next_u64() % 32] = 0x7F;  // 127
        }
    }
    return bytes;
}

double tolerance(QuantType type, double magnitude) { return 1e-5 * magnitude + (type == QuantType::F32 ? 1e-5 : 1e-4); }

}  // namespace

TEST(DotSimd, VecDotMatchesScalarOnEveryTarget) {
    for_each_target([](const char* target) {
        for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
            const QuantTraits& simd = *simd_block_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            const QuantType vdt = ref.vec_dot_type;
            Rng rng(7);
            for (int64_t blocks : {1, 2, 3, 7, 64, 65}) {
                const int64_t n = blocks * 32;
                for (size_t offset : {0u, 1u, 5u, 15u}) {
                    const auto w = random_row(type, n, rng, true, offset);
                    const auto x = random_row(vdt, n, rng, false, 15 - offset);
                    const float want = ref.vec_dot(n, w.data() + offset, x.data() + 15 - offset);
                    const float got = simd.vec_dot(n, w.data() + offset, x.data() + 15 - offset);
                    ASSERT_NEAR(got, want, tolerance(type, std::sqrt(static_cast<double>(n)) * 10))
                        << target << " " << quant_type_name(type) << " n " << n << " offset " << offset;
                }
            }
        }
    });
}

TEST(DotSimd, TilesMatchScalarOnEveryTarget) {
    for_each_target([](const char* target) {
        for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
            const QuantTraits& simd = *simd_block_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            const QuantType vdt = ref.vec_dot_type;
            Rng rng(11);
            const int64_t n = 5 * 32;
            for (int rows : {1, 2, 3, 5}) {
                for (int cols : {1, 3, 4, 7, 9}) {
                    // Rows and columns strided like matrices, one byte off alignment.
                    const size_t w_stride = quant_row_bytes(type, n) + 3, x_stride = quant_row_bytes(vdt, n) + 1;
                    std::vector<uint8_t> w(1 + rows * w_stride), x(1 + cols * x_stride);
                    for (int r = 0; r < rows; ++r) {
                        const auto row = random_row(type, n, rng, true, 0);
                        std::memcpy(w.data() + 1 + r * w_stride, row.data(), row.size());
                    }
                    for (int c = 0; c < cols; ++c) {
                        const auto row = random_row(vdt, n, rng, false, 0);
                        std::memcpy(x.data() + 1 + c * x_stride, row.data(), row.size());
                    }
                    const size_t y_stride = static_cast<size_t>(rows) + 2;
                    std::vector<float> want(cols * y_stride, -1.0f), got(want.size(), -1.0f);
                    ref.vec_dot_tile(n, w.data() + 1, w_stride, rows, x.data() + 1, x_stride, cols, want.data(), y_stride);
                    simd.vec_dot_tile(n, w.data() + 1, w_stride, rows, x.data() + 1, x_stride, cols, got.data(), y_stride);
                    for (size_t i = 0; i < want.size(); ++i) {
                        ASSERT_NEAR(got[i], want[i], tolerance(type, 100.0))
                            << target << " " << quant_type_name(type) << " tile " << rows << "x" << cols << " at " << i;
                    }
                }
            }
        }
    });
}

// The activation quantizer must give the scalar reference's bytes exactly
// (results may not depend on the CPU), including values on rounding ties.
TEST(DotSimd, Q8_0QuantizerGivesTheScalarBytesOnEveryTarget) {
    for_each_target([](const char* target) {
        Rng rng(9);
        for (int64_t blocks : {1, 3, 64}) {
            const int64_t n = blocks * 32;
            std::vector<float> x(static_cast<size_t>(n) + 1);
            for (auto& v : x) v = rng.next_normal() * 3.0f;
            // Ties: values that land exactly on k + 0.5 after scaling.
            for (int64_t i = 1; i < n; i += 7) x[i] = x[0] * ((i % 127) + 0.5f) / 127.0f;
            for (size_t offset : {0u, 1u}) {
                std::vector<uint8_t> want(quant_row_bytes(QuantType::Q8_0, n)), got(want.size());
                scalar_traits(QuantType::Q8_0)->from_float(x.data() + offset, want.data(), n);
                simd_block_traits(QuantType::Q8_0)->from_float(x.data() + offset, got.data(), n);
                ASSERT_EQ(got, want) << target << " n " << n << " offset " << offset;
            }
        }
    });
}

TEST(DotSimd, F16ToFloatMatchesScalarOnEveryTarget) {
    for_each_target([](const char* target) {
        Rng rng(3);
        for (int64_t n : {1, 7, 8, 16, 33, 1000}) {
            const auto h = random_row(QuantType::F16, n, rng, false, 1);
            std::vector<float> want(static_cast<size_t>(n)), got(want.size());
            scalar_traits(QuantType::F16)->to_float(h.data() + 1, want.data(), n);
            simd_block_traits(QuantType::F16)->to_float(h.data() + 1, got.data(), n);
            ASSERT_EQ(got, want) << target << " n " << n;
        }
    });
}

}  // namespace tessera
