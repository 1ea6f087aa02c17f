// The SIMD K-quant dot products (Q4_K, Q6_K . Q8_K) against the scalar
// references on every compiled target this CPU supports: quantized random
// rows, and raw random blocks (every scale and code pattern, including the
// 6-bit scale packing's high bits), several super-block counts, unaligned.
#include "ops/kquant_kernels.h"
#include "util/fp16.h"
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
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        body(hwy::TargetName(target));
    }
    hwy::SetSupportedTargetsForTest(0);
}

// Random bytes with sane fp16 scales (the rest of a block is any bits).
std::vector<uint8_t> raw_row(QuantType type, int64_t n, Rng& rng, size_t offset) {
    std::vector<uint8_t> bytes(offset + quant_row_bytes(type, n));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng.next_u64());
    const int64_t blocks = n / 256;
    for (int64_t i = 0; i < blocks; ++i) {
        uint8_t* block = bytes.data() + offset + i * quant_row_bytes(type, 256);
        const uint16_t d = fp32_to_fp16(0.01f + rng.next_float() * 0.01f);
        const uint16_t dmin = fp32_to_fp16(0.005f + rng.next_float() * 0.01f);
        if (type == QuantType::Q4_K) {
            std::memcpy(block, &d, 2);
            std::memcpy(block + 2, &dmin, 2);
        } else {
            std::memcpy(block + 208, &d, 2);
        }
    }
    return bytes;
}

std::vector<uint8_t> activation(int64_t n, Rng& rng, size_t offset) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = rng.next_normal();
    std::vector<uint8_t> bytes(offset + quant_row_bytes(QuantType::Q8_K, n));
    scalar_traits(QuantType::Q8_K)->from_float(x.data(), bytes.data() + offset, n);
    return bytes;
}

}  // namespace

TEST(KQuantSimd, VecDotAndTilesMatchScalarOnEveryTarget) {
    if (scalar_traits(QuantType::Q4_K) == nullptr || scalar_traits(QuantType::Q8_K) == nullptr) {
        GTEST_SKIP() << "no scalar K-quant reference in this build yet";
    }
    for_each_target([](const char* target) {
        for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
            const QuantTraits* simd = simd_kquant_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            if (simd == nullptr) continue;  // a target without K-quant kernels
            Rng rng(5);
            for (int64_t blocks : {1, 2, 3, 8}) {
                const int64_t n = blocks * 256;
                for (size_t offset : {0u, 3u, 13u}) {
                    for (bool raw : {false, true}) {
                        std::vector<uint8_t> w;
                        if (raw) {
                            w = raw_row(type, n, rng, offset);
                        } else {
                            std::vector<float> v(static_cast<size_t>(n));
                            for (auto& f : v) f = rng.next_normal();
                            w.resize(offset + quant_row_bytes(type, n));
                            ref.from_float(v.data(), w.data() + offset, n);
                        }
                        const auto x = activation(n, rng, 7);
                        const float want = ref.vec_dot(n, w.data() + offset, x.data() + 7);
                        const float got = simd->vec_dot(n, w.data() + offset, x.data() + 7);
                        ASSERT_NEAR(got, want, 1e-4 * (1.0 + std::fabs(want)) + 1e-3)
                            << target << " " << quant_type_name(type) << " n " << n << " raw " << raw;
                    }
                }
            }
            // A tile of 3 rows x 2 columns equals its single dot products.
            const int64_t n = 512;
            const size_t w_stride = quant_row_bytes(type, n), x_stride = quant_row_bytes(QuantType::Q8_K, n);
            std::vector<uint8_t> w, x;
            for (int r = 0; r < 3; ++r) {
                const auto row = raw_row(type, n, rng, 0);
                w.insert(w.end(), row.begin(), row.end());
            }
            for (int c = 0; c < 2; ++c) {
                const auto row = activation(n, rng, 0);
                x.insert(x.end(), row.begin(), row.end());
            }
            float y[6];
            simd->vec_dot_tile(n, w.data(), w_stride, 3, x.data(), x_stride, 2, y, 3);
            for (int c = 0; c < 2; ++c) {
                for (int r = 0; r < 3; ++r) {
                    const float want = ref.vec_dot(n, w.data() + r * w_stride, x.data() + c * x_stride);
                    ASSERT_NEAR(y[c * 3 + r], want, 1e-4 * (1.0 + std::fabs(want)) + 1e-3) << target;
                }
            }
        }
    });
}

}  // namespace tessera
