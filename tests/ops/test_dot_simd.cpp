// Every SIMD kernel of simd_block_traits (F32, F16, Q8_0, Q4_0: vec_dot,
// vec_dot_tile, to_float, the Q8_0 activation quantizer) against its scalar
// reference, on every target dot_hwy.cpp was compiled for that this CPU
// supports: random data including the extreme codes (-128 and 127 in Q8_0
// weights), block counts from 1 up (odd ones too), buffers 0..15 bytes off
// alignment, and tile shapes that leave partial register tiles on every
// edge. Q8_0 and Q4_0 dot products run in the canonical order on every
// target (ops/row_groups.h): they must equal the reference bit for bit. The
// float types' may differ from it only by float rounding: the tolerance is
// relative to the sum of |w_i * x_i|.
#include "ops/dot_kernels.h"
#include "ops/float_canonical.h"
#include "util/rng.h"

#include "ops/each_target.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

constexpr QuantType kTypes[] = {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0};

// The targets of the block products (simd_block_targets).
template <typename Body>
void for_each_block_target(Body body) {
    test::for_each_target(body, simd_block_targets());
}

// A row of n elements of `type` in random valid bytes, `offset` bytes into
// the returned buffer: quantized from random floats, then (for Q8_0 weights)
// some codes forced to the extremes.
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

// sum |w_i * x_i| from the scalar dequantizations: the scale of the rounding
// a reordered float sum may differ by.
double sum_abs_terms(QuantType type, const uint8_t* w, QuantType x_type, const uint8_t* x, int64_t n) {
    std::vector<float> wf(static_cast<size_t>(n)), xf(wf.size());
    scalar_traits(type)->to_float(w, wf.data(), n);
    scalar_traits(x_type)->to_float(x, xf.data(), n);
    double sum = 0;
    for (size_t i = 0; i < wf.size(); ++i) sum += std::fabs(static_cast<double>(wf[i]) * xf[i]);
    return sum;
}

double tolerance(double abs_terms) { return 1e-5 * abs_terms + 1e-6; }

// The block types' rows follow the canonical order: no tolerance.
double tolerance_of(QuantType type, double abs_terms) {
    return type == QuantType::Q8_0 || type == QuantType::Q4_0 ? 0.0 : tolerance(abs_terms);
}

}  // namespace

TEST(DotSimd, VecDotMatchesScalarOnEveryTarget) {
    for_each_block_target([](const char* target) {
        for (QuantType type : kTypes) {
            const QuantTraits& simd = *simd_block_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            const QuantType vdt = ref.vec_dot_type;
            Rng rng(7);
            for (int64_t blocks : {1, 2, 3, 4, 5, 7, 64, 65, 176}) {
                const int64_t n = blocks * 32;
                for (size_t w_off : {0u, 1u, 2u, 7u, 15u}) {
                    const size_t x_off = (w_off * 5 + 3) % 16;
                    const auto w = random_row(type, n, rng, true, w_off);
                    const auto x = random_row(vdt, n, rng, false, x_off);
                    const float want = ref.vec_dot(n, w.data() + w_off, x.data() + x_off);
                    const float got = simd.vec_dot(n, w.data() + w_off, x.data() + x_off);
                    const double tol =
                        tolerance_of(type, sum_abs_terms(type, w.data() + w_off, vdt, x.data() + x_off, n));
                    ASSERT_NEAR(got, want, tol) << target << " " << quant_type_name(type) << " n " << n
                                                << " offsets " << w_off << "," << x_off;
                }
            }
        }
    });
}

TEST(DotSimd, TilesMatchScalarOnEveryTarget) {
    for_each_block_target([](const char* target) {
        for (QuantType type : kTypes) {
            const QuantTraits& simd = *simd_block_traits(type);
            const QuantTraits& ref = *scalar_traits(type);
            const QuantType vdt = ref.vec_dot_type;
            Rng rng(11);
            for (int64_t blocks : {1, 3, 8}) {
                const int64_t n = blocks * 32;
                // Past 16 rows and 8 (Q8_0) or 16 (Q4_0) columns AVX3_DL runs
                // 16-row groups (dot_int8_vnni-inl.h), the rest as before.
                for (int rows : {1, 2, 3, 4, 5, 7, 9, 16, 33}) {
                    for (int cols : {1, 2, 3, 4, 5, 7, 8, 9, 16, 23}) {
                        // Rows and columns strided like matrices, off alignment.
                        const size_t w_off = (rows * 3) % 16, x_off = (cols * 7) % 16;
                        const size_t w_stride = quant_row_bytes(type, n) + 3;
                        const size_t x_stride = quant_row_bytes(vdt, n) + 1;
                        std::vector<uint8_t> w(w_off + rows * w_stride), x(x_off + cols * x_stride);
                        for (int r = 0; r < rows; ++r) {
                            const auto row = random_row(type, n, rng, true, 0);
                            std::memcpy(w.data() + w_off + r * w_stride, row.data(), row.size());
                        }
                        for (int c = 0; c < cols; ++c) {
                            const auto row = random_row(vdt, n, rng, false, 0);
                            std::memcpy(x.data() + x_off + c * x_stride, row.data(), row.size());
                        }
                        // Padding between the columns of y must stay untouched.
                        const size_t y_stride = static_cast<size_t>(rows) + 2;
                        std::vector<float> want(cols * y_stride, -1.0f), got(want.size(), -1.0f);
                        ref.vec_dot_tile(n, w.data() + w_off, w_stride, rows, x.data() + x_off, x_stride, cols,
                                         want.data(), y_stride);
                        simd.vec_dot_tile(n, w.data() + w_off, w_stride, rows, x.data() + x_off, x_stride, cols,
                                          got.data(), y_stride);
                        for (int c = 0; c < cols; ++c) {
                            for (size_t r = 0; r < y_stride; ++r) {
                                const size_t i = c * y_stride + r;
                                const double tol =
                                    r < static_cast<size_t>(rows)
                                        ? tolerance_of(type, sum_abs_terms(type, w.data() + w_off + r * w_stride,
                                                                           vdt, x.data() + x_off + c * x_stride, n))
                                        : 0.0;
                                ASSERT_NEAR(got[i], want[i], tol)
                                    << target << " " << quant_type_name(type) << " n " << n << " tile " << rows
                                    << "x" << cols << " row " << r << " col " << c;
                            }
                        }
                    }
                }
            }
        }
    });
}

// A tile call must give each cell what a single dot product gives for it, on
// the same target (matmul and matvec may mix the two).
TEST(DotSimd, TileCellsMatchTheSameTargetsVecDot) {
    for_each_block_target([](const char* target) {
        for (QuantType type : kTypes) {
            const QuantTraits& simd = *simd_block_traits(type);
            const QuantType vdt = simd.vec_dot_type;
            Rng rng(13);
            const int64_t n = 9 * 32;
            const int rows = 17, cols = 17;  // AVX3_DL: 16-row groups and register tiles
            const size_t w_stride = quant_row_bytes(type, n), x_stride = quant_row_bytes(vdt, n);
            std::vector<uint8_t> w, x;
            for (int r = 0; r < rows; ++r) {
                const auto row = random_row(type, n, rng, true, 0);
                w.insert(w.end(), row.begin(), row.end());
            }
            for (int c = 0; c < cols; ++c) {
                const auto row = random_row(vdt, n, rng, false, 0);
                x.insert(x.end(), row.begin(), row.end());
            }
            std::vector<float> y(rows * cols);
            simd.vec_dot_tile(n, w.data(), w_stride, rows, x.data(), x_stride, cols, y.data(), rows);
            for (int c = 0; c < cols; ++c) {
                for (int r = 0; r < rows; ++r) {
                    const float dot = simd.vec_dot(n, w.data() + r * w_stride, x.data() + c * x_stride);
                    const double tol = tolerance(sum_abs_terms(type, w.data() + r * w_stride, vdt,
                                                               x.data() + c * x_stride, n));
                    ASSERT_NEAR(y[c * rows + r], dot, tol) << target << " " << quant_type_name(type);
                }
            }
        }
    });
}

// The activation quantizer must give the scalar reference's bytes exactly
// (results may not depend on the CPU), including values on rounding ties,
// all-zero blocks, tiny and huge magnitudes.
// F32, F16 and BF16-with-F32-activation dot products (attention's scores,
// float weights, narrowed routers) follow the canonical order of
// ops/float_canonical.h on every target, single and in tiles of every shape:
// the same bits whatever the node's CPU.
TEST(DotSimd, FloatDotsFollowTheCanonicalOrderOnEveryTarget) {
    for_each_block_target([](const char* target) {
        Rng rng(21);
        for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16_F32ACT}) {
            const QuantTraits& simd = *simd_block_traits(type);
            // Past 1024 elements (AVX2, AVX-512) several columns go through n in spans; past
            // 16 rows or 64 columns a call is cut into tiles of that size.
            struct Shape {
                int64_t n;
                int rows, cols;
            };
            for (const Shape shape : {Shape{1, 3, 5}, Shape{5, 3, 5}, Shape{15, 3, 5}, Shape{16, 3, 5},
                                      Shape{17, 3, 5}, Shape{33, 3, 5}, Shape{64, 3, 5}, Shape{100, 3, 5},
                                      Shape{1000, 3, 5}, Shape{1024, 7, 2}, Shape{1040, 3, 5},
                                      Shape{2053, 17, 70}, Shape{1537, 4, 65}}) {
                const int64_t n = shape.n;
                const int kRows = shape.rows, kCols = shape.cols;
                const size_t row_bytes = quant_row_bytes(type, n) + 6;  // strided and off alignment
                std::vector<uint8_t> w(2 + kRows * row_bytes);
                std::vector<float> x(static_cast<size_t>(kCols * (n + 1)));
                for (int r = 0; r < kRows; ++r) {
                    const auto row = random_row(type, n, rng, false, 0);
                    std::memcpy(w.data() + 2 + r * row_bytes, row.data(), quant_row_bytes(type, n));
                }
                for (float& v : x) v = rng.next_normal();
                const auto canonical = [&](int r, int c) {
                    const uint8_t* wr = w.data() + 2 + r * row_bytes;
                    const float* xc = x.data() + c * (n + 1);
                    if (type == QuantType::F16) return f16_dot_canonical(n, wr, xc);
                    std::vector<float> wf(static_cast<size_t>(n));
                    scalar_traits(type)->to_float(wr, wf.data(), n);
                    return f32_dot_canonical(n, wf.data(), xc);
                };
                for (int r = 0; r < kRows; ++r) {
                    const float got = simd.vec_dot(n, w.data() + 2 + r * row_bytes, x.data());
                    const float want = canonical(r, 0);
                    ASSERT_EQ(0, std::memcmp(&got, &want, sizeof got)) << target << " " << quant_type_name(type)
                                                                        << " n " << n << ": " << got << " != " << want;
                }
                std::vector<float> y(kRows * kCols);
                simd.vec_dot_tile(n, w.data() + 2, row_bytes, kRows, x.data(), (n + 1) * sizeof(float), kCols,
                                  y.data(), kRows);
                for (int c = 0; c < kCols; ++c) {
                    for (int r = 0; r < kRows; ++r) {
                        const float want = canonical(r, c);
                        ASSERT_EQ(0, std::memcmp(&y[c * kRows + r], &want, sizeof want))
                            << target << " " << quant_type_name(type) << " n " << n << " tile cell " << r << "," << c;
                    }
                }
            }
        }
    });
}

// BF16 weights against BF16 activations follow float_canonical.h's pairs
// order on every target (vdpbf16ps where the CPU has it, fused
// multiply-adds elsewhere), single and in tiles of every shape, with rows
// off alignment, lengths that leave every kind of last chunk, and values
// that meet the flushing: denormal weights and activations, products and
// sums below the smallest normal float, signed zeros.
TEST(DotSimd, Bf16PairsFollowTheCanonicalOrderOnEveryTarget) {
    for_each_block_target([](const char* target) {
        Rng rng(23);
        const QuantTraits& simd = *simd_block_traits(QuantType::BF16);
        ASSERT_EQ(simd.vec_dot_type, QuantType::BF16);
        // A BF16 value: normal around 1, tiny (products and sums near the
        // smallest normal), denormal, or a zero of either sign.
        const auto value = [&](int kind) -> uint16_t {
            const auto bits = static_cast<uint16_t>(rng.next_u64());
            switch (kind) {
                case 0: return static_cast<uint16_t>((bits & 0x807Fu) | ((117u + rng.next_u64() % 20) << 7));
                case 1: return static_cast<uint16_t>((bits & 0x807Fu) | ((rng.next_u64() % 8) << 7));
                case 2: return static_cast<uint16_t>((bits & 0x807Fu) | ((60u + rng.next_u64() % 8) << 7));
                default: return static_cast<uint16_t>(bits & 0x8000u);
            }
        };
        struct Shape {
            int64_t n;
            int rows, cols;
        };
        for (const Shape shape : {Shape{1, 3, 5}, Shape{2, 3, 5}, Shape{31, 3, 5}, Shape{32, 3, 5}, Shape{33, 3, 5},
                                  Shape{63, 9, 1}, Shape{64, 5, 3}, Shape{100, 3, 5}, Shape{1000, 3, 5},
                                  Shape{1024, 7, 2}, Shape{2053, 17, 70}, Shape{1537, 4, 65}}) {
            // Mixes: plain values; tiny weights against values of 2^-60 or so
            // (products near the smallest normal); every kind at random.
            for (int mix = 0; mix < 3; ++mix) {
                const int64_t n = shape.n;
                const int kRows = shape.rows, kCols = shape.cols;
                const size_t w_stride = 2 * n + 6, x_stride = 2 * n + 2;  // strided and off alignment
                std::vector<uint8_t> w(2 + kRows * w_stride), x(2 + kCols * x_stride);
                for (int r = 0; r < kRows; ++r) {
                    for (int64_t i = 0; i < n; ++i) {
                        const uint16_t h = value(mix == 0 ? 0 : mix == 1 ? 2 : static_cast<int>(rng.next_u64() % 4));
                        std::memcpy(w.data() + 2 + r * w_stride + 2 * i, &h, 2);
                    }
                }
                for (int c = 0; c < kCols; ++c) {
                    for (int64_t i = 0; i < n; ++i) {
                        const uint16_t h = value(mix == 0 ? 0 : mix == 1 ? 2 : static_cast<int>(rng.next_u64() % 4));
                        std::memcpy(x.data() + 2 + c * x_stride + 2 * i, &h, 2);
                    }
                }
                const auto canonical = [&](int r, int c) {
                    return bf16_pairs_dot_canonical(n, w.data() + 2 + r * w_stride, x.data() + 2 + c * x_stride);
                };
                for (int r = 0; r < kRows; ++r) {
                    const float got = simd.vec_dot(n, w.data() + 2 + r * w_stride, x.data() + 2);
                    const float want = canonical(r, 0);
                    ASSERT_EQ(0, std::memcmp(&got, &want, sizeof got))
                        << target << " n " << n << " mix " << mix << ": " << got << " != " << want;
                }
                std::vector<float> y(kRows * kCols);
                simd.vec_dot_tile(n, w.data() + 2, w_stride, kRows, x.data() + 2, x_stride, kCols, y.data(), kRows);
                for (int c = 0; c < kCols; ++c) {
                    for (int r = 0; r < kRows; ++r) {
                        const float want = canonical(r, c);
                        ASSERT_EQ(0, std::memcmp(&y[c * kRows + r], &want, sizeof want))
                            << target << " n " << n << " mix " << mix << " tile cell " << r << "," << c << ": "
                            << y[c * kRows + r] << " != " << want;
                    }
                }
            }
        }
    });
}

// The pairs order's scalar definition on values worked by hand: the odd
// element of a pair goes first, a denormal input counts as zero, and a
// result below the smallest normal float becomes a zero of its sign.
TEST(DotSimd, Bf16PairsStepsAreTheInstructionsSteps) {
    const auto bf16 = [](float f) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        return static_cast<uint16_t>(bits >> 16);
    };
    // Lane 0 holds 1 after the first chunk (element 1). In the second, odd
    // element 33 (2^-24) goes first: 1 + 2^-24 is a tie and stays 1, then
    // element 32 (2^-24 + 2^-31, above half an ulp) makes 1 + 2^-23. The
    // even element first would make 1 + 2^-23, then a tie up to 1 + 2^-22.
    std::vector<uint16_t> w(34, 0), x(34, bf16(1.0f));
    w[1] = bf16(1.0f);
    w[33] = bf16(0x1p-24f);
    w[32] = bf16(0x1p-24f + 0x1p-31f);
    EXPECT_EQ(bf16_pairs_dot_canonical(34, w.data(), x.data()), 1.0f + 0x1p-23f);
    // A denormal weight counts as zero; a tiny result flushes to a signed zero.
    EXPECT_EQ(bf16_pairs_step(0x1p-130f, 1.0f, 0.0f), 0.0f);
    const float flushed = bf16_pairs_step(-0x1p-70f, 0x1p-60f, 0.0f);
    EXPECT_EQ(flushed, 0.0f);
    EXPECT_TRUE(std::signbit(flushed));
    EXPECT_EQ(bf16_pairs_step(0x1p-60f, 0x1p-60f, 0.0f), 0x1p-120f);
}

// BF16's converter (activations before a BF16 product, and `quantize`'s
// weights) gives the scalar reference's bytes on every target: ties to
// even both ways, NaNs of either sign kept quiet, infinities, denormals,
// and lengths that leave a partial vector.
TEST(DotSimd, Bf16ConverterGivesTheScalarBytesOnEveryTarget) {
    for_each_block_target([](const char* target) {
        Rng rng(31);
        for (int64_t n : {1, 7, 16, 33, 1000}) {
            std::vector<float> x(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) {
                uint32_t bits = static_cast<uint32_t>(rng.next_u64());
                switch (i % 6) {
                    case 0: bits = (bits & 0xffff0000u) | 0x8000u; break;  // a tie
                    case 1: bits |= 0x7f800000u; break;                     // NaN or infinity
                    case 2: bits &= 0x807fffffu; break;                     // denormal
                    default: {
                        const float v = rng.next_normal();
                        std::memcpy(&bits, &v, 4);
                    }
                }
                std::memcpy(&x[static_cast<size_t>(i)], &bits, 4);
            }
            std::vector<uint16_t> got(static_cast<size_t>(n)), want(got.size());
            simd_block_traits(QuantType::BF16)->from_float(x.data(), got.data(), n);
            scalar_traits(QuantType::BF16)->from_float(x.data(), want.data(), n);
            ASSERT_EQ(got, want) << target << " n " << n;
        }
    });
}

TEST(DotSimd, Q8_0QuantizerGivesTheScalarBytesOnEveryTarget) {
    for_each_block_target([](const char* target) {
        Rng rng(9);
        for (int64_t blocks : {1, 2, 3, 64}) {
            const int64_t n = blocks * 32;
            for (float magnitude : {3.0f, 1e-6f, 1e-30f, 3e4f, 1e30f}) {
                std::vector<float> x(static_cast<size_t>(n) + 16);
                for (auto& v : x) v = rng.next_normal() * magnitude;
                // Ties: values that land exactly on k + 0.5 after scaling.
                for (int64_t i = 1; i < n; i += 7) x[i] = x[0] * ((i % 127) + 0.5f) / 127.0f;
                // An all-zero block and one of a single nonzero value.
                if (blocks >= 3) {
                    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
                    std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
                    x[70] = -magnitude;
                }
                for (size_t offset : {0u, 1u, 3u, 15u}) {
                    std::vector<uint8_t> want(quant_row_bytes(QuantType::Q8_0, n)), got(want.size());
                    scalar_traits(QuantType::Q8_0)->from_float(x.data() + offset, want.data(), n);
                    simd_block_traits(QuantType::Q8_0)->from_float(x.data() + offset, got.data(), n);
                    ASSERT_EQ(got, want) << target << " n " << n << " magnitude " << magnitude << " offset "
                                         << offset;
                }
            }
        }
    });
}

TEST(DotSimd, ToFloatMatchesScalarOnEveryTarget) {
    for_each_block_target([](const char* target) {
        Rng rng(3);
        for (QuantType type : kTypes) {
            const int64_t step = type == QuantType::F32 || type == QuantType::F16 ? 1 : 32;
            for (int64_t count : {1, 7, 8, 16, 33}) {
                const int64_t n = count * step;
                const auto h = random_row(type, n, rng, true, 1);
                std::vector<float> want(static_cast<size_t>(n)), got(want.size());
                scalar_traits(type)->to_float(h.data() + 1, want.data(), n);
                simd_block_traits(type)->to_float(h.data() + 1, got.data(), n);
                ASSERT_EQ(got, want) << target << " " << quant_type_name(type) << " n " << n;
            }
        }
    });
}

// Every compiled target is reported, and the default dispatch is the best.
TEST(DotSimd, TargetsAreListedBestFirst) {
    const std::vector<int64_t> targets = simd_block_targets();
    ASSERT_FALSE(targets.empty());
    for (size_t i = 1; i < targets.size(); ++i) EXPECT_LT(targets[i - 1], targets[i]);  // lower bit = better
    EXPECT_EQ(simd_block_traits(QuantType::F32), [&] {
        hwy::SetSupportedTargetsForTest(targets[0]);
        const QuantTraits* best = simd_block_traits(QuantType::F32);
        hwy::SetSupportedTargetsForTest(0);
        return best;
    }());
}

}  // namespace tessera
