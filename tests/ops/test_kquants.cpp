// The SIMD K-quant kernels (kquants_hwy.cpp) against the scalar references,
// on every compiled target this CPU supports: Q4_K . Q8_K and Q6_K . Q8_K on
// quantized Gaussian rows and on random bytes (every code and scale bit
// pattern), several super-block counts, every byte offset 0..15; tiles of
// every shape up to past the register tile; the Q8_K quantizer byte for byte
// (ties, signs, zeros included).

// The same target set as kquants_hwy.cpp, so the loop below visits each of
// its targets (AVX3_DL included) and no other.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#define HWY_WANT_AVX3_DL
#include <hwy/targets.h>

#include "ops/kquants_hwy.h"
#include "util/fp16.h"
#include "util/rng.h"

#include "ops/each_target.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {

namespace {

constexpr int64_t kBlock = 256;

std::vector<float> gaussian(int64_t n, Rng& rng, float scale = 1.0f, float shift = 0.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& f : v) f = rng.next_normal() * scale + shift;
    return v;
}

// A row of n weights of `type` at `offset` bytes into the buffer: quantized
// from Gaussian values by the scalar reference, or random bytes with finite
// fp16 scales (codes, 6-bit scales and mins, int8 scales take every pattern).
std::vector<uint8_t> weight_row(QuantType type, int64_t n, Rng& rng, size_t offset, bool raw) {
    const uint64_t block_bytes = quant_row_bytes(type, kBlock);
    std::vector<uint8_t> bytes(offset + quant_row_bytes(type, n));
    if (!raw) {
        const auto v = gaussian(n, rng, 0.05f, type == QuantType::Q4_K ? 0.02f : 0.0f);
        scalar_traits(type)->from_float(v.data(), bytes.data() + offset, n);
        return bytes;
    }
    for (auto& b : bytes) b = static_cast<uint8_t>(rng.next_u64());
    for (int64_t i = 0; i < n / kBlock; ++i) {
        uint8_t* block = bytes.data() + offset + i * block_bytes;
        const uint16_t d = fp32_to_fp16((rng.next_float() - 0.3f) * 0.02f);
        const uint16_t dmin = fp32_to_fp16((rng.next_float() - 0.3f) * 0.02f);
        if (type == QuantType::Q4_K) {
            std::memcpy(block, &d, 2);
            std::memcpy(block + 2, &dmin, 2);
        } else {
            std::memcpy(block + 208, &d, 2);
        }
    }
    return bytes;
}

std::vector<uint8_t> activation_row(int64_t n, Rng& rng, size_t offset) {
    const auto x = gaussian(n, rng);
    std::vector<uint8_t> bytes(offset + quant_row_bytes(QuantType::Q8_K, n));
    scalar_traits(QuantType::Q8_K)->from_float(x.data(), bytes.data() + offset, n);
    return bytes;
}

// An upper bound on the sum of |terms| the kernels add up in float: the
// activation scale times, per block, |d| * sum|sc * q * y| plus (Q4_K)
// |dmin| * sum|m * y|. Rounding error is a small multiple of eps times it.
double magnitude(QuantType type, int64_t n, const uint8_t* w, const uint8_t* x) {
    double total = 0;
    const uint64_t wbytes = quant_row_bytes(type, kBlock);
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const uint8_t* wb = w + b * wbytes;
        const uint8_t* xb = x + b * 292;
        float dx;
        std::memcpy(&dx, xb, 4);
        double sum_y = 0;
        for (int i = 0; i < kBlock; ++i) sum_y += std::abs(static_cast<int8_t>(xb[4 + i]));
        uint16_t h;
        if (type == QuantType::Q4_K) {
            std::memcpy(&h, wb, 2);
            const double d = std::fabs(fp16_to_fp32(h));
            std::memcpy(&h, wb + 2, 2);
            const double dmin = std::fabs(fp16_to_fp32(h));
            total += std::fabs(dx) * (d * 63 * 15 + dmin * 63) * sum_y;
        } else {
            std::memcpy(&h, wb + 208, 2);
            total += std::fabs(dx) * std::fabs(fp16_to_fp32(h)) * 128 * 32 * sum_y;
        }
    }
    return total;
}

double tolerance(QuantType type, int64_t n, const uint8_t* w, const uint8_t* x) {
    return 1e-6 * magnitude(type, n, w, x) + 1e-6;
}

}  // namespace

TEST(KQuantsSimd, EveryTargetHasTheKernels) {
    test::for_each_target([](const std::string& target) {
        for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_K}) {
            const QuantTraits* simd = kquants_simd_traits(type);
            ASSERT_NE(simd, nullptr) << target << " " << quant_type_name(type);
            EXPECT_EQ(simd->type, type);
            EXPECT_EQ(simd->vec_dot_type, QuantType::Q8_K);
        }
        EXPECT_EQ(kquants_simd_traits(QuantType::Q4_0), nullptr);
    });
}

TEST(KQuantsSimd, VecDotMatchesScalarOnEveryTarget) {
    test::for_each_target([](const std::string& target) {
        for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
            const QuantTraits& simd = *kquants_simd_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            Rng rng(11);
            int case_index = 0;
            for (int64_t blocks : {1, 2, 3, 4, 5, 8, 11}) {
                const int64_t n = blocks * kBlock;
                for (bool raw : {false, true}) {
                    for (int rep = 0; rep < 4; ++rep, ++case_index) {
                        // Every offset 0..15 of both buffers over the cases.
                        const size_t w_offset = static_cast<size_t>(case_index % 16);
                        const size_t x_offset = static_cast<size_t>((case_index * 7 + 3) % 16);
                        const auto w = weight_row(type, n, rng, w_offset, raw);
                        const auto x = activation_row(n, rng, x_offset);
                        const uint8_t* wp = w.data() + w_offset;
                        const uint8_t* xp = x.data() + x_offset;
                        const float want = ref.vec_dot(n, wp, xp);
                        const float got = simd.vec_dot(n, wp, xp);
                        ASSERT_NEAR(got, want, tolerance(type, n, wp, xp))
                            << target << " " << quant_type_name(type) << " n " << n << " raw " << raw << " offsets "
                            << w_offset << "/" << x_offset;
                        if (type == QuantType::Q6_K) {
                            // Q6_K's row kernels give the canonical order's bits on every target
                            // (Q4_K's rows are grouped wherever that matters).
                            ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                                << target << " n " << n << ": " << got << " vs " << want;
                        }
                    }
                }
            }
        }
    });
}

// Tiles of every shape from 1 x 1 to past the largest register tile (4 x 4),
// rows and columns with padded strides at odd offsets: each element equals
// the target's own vec_dot exactly (the same integer and float steps), and
// the scalar reference within rounding.
TEST(KQuantsSimd, TilesMatchDotsOnEveryTarget) {
    test::for_each_target([](const std::string& target) {
        for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
            const QuantTraits& simd = *kquants_simd_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            Rng rng(23);
            for (int64_t blocks : {1, 3}) {
                const int64_t n = blocks * kBlock;
                const size_t w_stride = quant_row_bytes(type, n) + 5;
                const size_t x_stride = quant_row_bytes(QuantType::Q8_K, n) + 9;
                constexpr int kRows = 9, kCols = 6;
                std::vector<uint8_t> w(3 + kRows * w_stride), x(1 + kCols * x_stride);
                for (int r = 0; r < kRows; ++r) {
                    const auto row = weight_row(type, n, rng, 0, r % 2 == 1);
                    std::memcpy(w.data() + 3 + r * w_stride, row.data(), row.size());
                }
                for (int c = 0; c < kCols; ++c) {
                    const auto row = activation_row(n, rng, 0);
                    std::memcpy(x.data() + 1 + c * x_stride, row.data(), row.size());
                }
                const uint8_t* wp = w.data() + 3;
                const uint8_t* xp = x.data() + 1;
                for (int rows = 1; rows <= kRows; ++rows) {
                    for (int cols = 1; cols <= kCols; ++cols) {
                        const size_t y_stride = static_cast<size_t>(rows) + 2;
                        std::vector<float> y(cols * y_stride, -1.0f);
                        simd.vec_dot_tile(n, wp, w_stride, rows, xp, x_stride, cols, y.data(), y_stride);
                        for (int c = 0; c < cols; ++c) {
                            for (int r = 0; r < rows; ++r) {
                                const uint8_t* wr = wp + r * w_stride;
                                const uint8_t* xc = xp + c * x_stride;
                                const float got = y[c * y_stride + r];
                                ASSERT_EQ(got, simd.vec_dot(n, wr, xc))
                                    << target << " " << quant_type_name(type) << " tile " << rows << "x" << cols
                                    << " at " << r << "," << c;
                                ASSERT_NEAR(got, ref.vec_dot(n, wr, xc), tolerance(type, n, wr, xc)) << target;
                            }
                            // Padding between tile rows is left alone.
                            ASSERT_EQ(y[c * y_stride + rows], -1.0f) << target;
                        }
                    }
                }
            }
        }
    });
}

// The activation quantizer is bytes-identical to the reference: random rows
// of several scales, exact rounding ties, the extreme on either sign (and a
// tie between +a and -a, where the first one's sign wins), zero and tiny
// blocks, at unaligned source and destination offsets.
TEST(KQuantsSimd, Q8KQuantizerMatchesScalarBytesOnEveryTarget) {
    std::vector<std::vector<float>> rows;
    Rng rng(31);
    for (float scale : {1.0f, 1e-3f, 300.0f}) rows.push_back(gaussian(3 * kBlock, rng, scale));
    {
        // Max |x| = 127 at a negative element: the scale is exactly 1, so
        // x.5 values are exact ties (round to even) and codes reach +-127.
        std::vector<float> v(2 * kBlock);
        for (int i = 0; i < 2 * kBlock; ++i) v[i] = static_cast<float>(i % 64) - 31.5f;
        v[5] = -127.0f;
        v[kBlock + 200] = -127.0f;
        v[kBlock + 201] = 127.0f;
        rows.push_back(v);
    }
    {
        // +a before -a with the same magnitude: the first (positive) sets the sign.
        std::vector<float> v = gaussian(kBlock, rng);
        v[17] = 9.0f;
        v[230] = -9.0f;
        rows.push_back(v);
        v[17] = -9.0f;
        v[230] = 9.0f;
        rows.push_back(v);
    }
    rows.emplace_back(2 * kBlock, 0.0f);           // all zeros
    rows.push_back(gaussian(kBlock, rng, 1e-30f));  // tiny: codes from a huge inverse scale
    rows.back()[40] = -0.0f;

    test::for_each_target([&](const std::string& target) {
        const QuantTraits& simd = *kquants_simd_traits(QuantType::Q8_K);
        const QuantTraits& ref = *scalar_traits(QuantType::Q8_K);
        for (size_t i = 0; i < rows.size(); ++i) {
            const int64_t n = static_cast<int64_t>(rows[i].size());
            const size_t src_offset = i % 4;  // floats
            const size_t dst_offset = 1 + i % 15;
            std::vector<float> src(src_offset + n);
            std::memcpy(src.data() + src_offset, rows[i].data(), n * sizeof(float));
            std::vector<uint8_t> want(dst_offset + quant_row_bytes(QuantType::Q8_K, n), 0xAB);
            std::vector<uint8_t> got(want.size(), 0xCD);
            ref.from_float(src.data() + src_offset, want.data() + dst_offset, n);
            simd.from_float(src.data() + src_offset, got.data() + dst_offset, n);
            for (size_t k = dst_offset; k < want.size(); ++k) {
                ASSERT_EQ(got[k], want[k]) << target << " row " << i << " byte " << k - dst_offset;
            }
            ASSERT_EQ(got[dst_offset - 1], 0xCD) << target << ": wrote before the row";
        }
    });
}

// A matrix-vector product through compute_traits runs the SIMD kernels.
TEST(KQuantsSimd, ComputeTraitsDispatchToSimd) {
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_K}) {
        EXPECT_EQ(compute_traits(type), kquants_simd_traits(type)) << quant_type_name(type);
    }
}

}  // namespace tessera
