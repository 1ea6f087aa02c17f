#include "ops/iq_grids.h"
#include "ops/nvfp4_scalar.h"
#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/fp16.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tessera {

namespace {

std::vector<float> random_floats(int64_t n, uint64_t seed, float scale = 1.0f) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.next_normal() * scale;
    return v;
}

// Bytes of n elements of `type`, placed at an odd offset inside a larger
// buffer so kernels cannot rely on alignment.
struct Unaligned {
    std::vector<uint8_t> storage;
    uint8_t* p;
    Unaligned(QuantType type, int64_t n) : storage(quant_row_bytes(type, n) + 3), p(storage.data() + 1) {}
};

const QuantType kRowTypes[] = {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0};

}  // namespace

// The internal type of a narrowed router (BF16 values, F32 activations) has
// a layout for the engine's sizes, but a file naming its id, or a user
// naming it, is refused: GGUF has no such type.
TEST(Quant, TheInternalTypeIsNeitherReadFromAFileNorParsed) {
    const auto id = static_cast<uint32_t>(QuantType::BF16_F32ACT);
    EXPECT_TRUE(is_internal_type(QuantType::BF16_F32ACT));
    EXPECT_FALSE(is_internal_type(QuantType::BF16));
    EXPECT_FALSE(quant_layout(id).has_value());
    EXPECT_FALSE(parse_quant_type(quant_type_name(QuantType::BF16_F32ACT)).has_value());
    EXPECT_EQ(quant_row_bytes(QuantType::BF16_F32ACT, 64), 128u);
    EXPECT_EQ(compute_traits(QuantType::BF16_F32ACT)->vec_dot_type, QuantType::F32);
    EXPECT_EQ(compute_traits(QuantType::BF16)->vec_dot_type, QuantType::BF16);
}

TEST(Quant, LayoutsMatchGgml) {
    EXPECT_EQ(layout_of(QuantType::Q8_0).block_bytes, 34u);
    EXPECT_EQ(layout_of(QuantType::Q4_0).block_bytes, 18u);
    EXPECT_EQ(layout_of(QuantType::Q4_K).block_bytes, 144u);
    EXPECT_EQ(layout_of(QuantType::Q6_K).block_bytes, 210u);
    EXPECT_EQ(quant_row_bytes(QuantType::Q4_0, 64), 36u);
    EXPECT_THROW(quant_row_bytes(QuantType::Q4_0, 33), Error);
    EXPECT_FALSE(quant_layout(1000).has_value());
    EXPECT_EQ(parse_quant_type("q4_0"), QuantType::Q4_0);
    EXPECT_EQ(layout_of(QuantType::IQ4_XS).block_bytes, 136u);
    EXPECT_EQ(layout_of(QuantType::MXFP4).block_bytes, 17u);
    EXPECT_EQ(quant_layout(39)->type, QuantType::MXFP4);
    EXPECT_EQ(quant_layout(41)->type, QuantType::Q1_0);
    EXPECT_EQ(quant_row_bytes(QuantType::Q1_0, 256), 36u);
    EXPECT_NE(compute_traits(QuantType::Q1_0), nullptr);
    EXPECT_EQ(quant_layout(42)->type, QuantType::Q2_0);
    EXPECT_EQ(quant_row_bytes(QuantType::Q2_0, 128), 36u);
    EXPECT_NE(compute_traits(QuantType::Q2_0), nullptr);
    EXPECT_EQ(quant_layout(40)->type, QuantType::NVFP4);
    EXPECT_EQ(quant_row_bytes(QuantType::NVFP4, 128), 72u);
    EXPECT_NE(compute_traits(QuantType::NVFP4), nullptr);
    EXPECT_NE(compute_traits(QuantType::TQ1_0), nullptr);
    EXPECT_NE(compute_traits(QuantType::TQ2_0), nullptr);
    EXPECT_EQ(quant_row_bytes(QuantType::TQ1_0, 512), 108u);
    EXPECT_EQ(quant_row_bytes(QuantType::TQ2_0, 512), 132u);
    EXPECT_EQ(compute_traits(QuantType::Q8_1), nullptr);  // an activation type llama.cpp never stores weights in
    EXPECT_NE(compute_traits(QuantType::IQ1_S), nullptr);
    EXPECT_NE(compute_traits(QuantType::IQ2_XXS), nullptr);
    EXPECT_THROW(require_weight_traits(QuantType::Q8_K, "w"), Error);  // activations only
    EXPECT_NO_THROW(require_weight_traits(QuantType::Q4_K, "w"));
    EXPECT_THROW(require_compute_traits(QuantType::F64, "blk.0.attn_q.weight"), Error);
}

// Quantize then dequantize: the error per element stays within the type's step.
// The grid quantizers' neighbour search (llama.cpp's find_best_neighbour):
// the nearest of a level vector's neighbours, the first of equal distance;
// with only NaN distances (a row holding NaN or infinity) still one of them,
// never an index outside the set.
TEST(Quant, GridNeighbourSearchKeepsToTheNeighbours) {
    for (QuantType type : {QuantType::IQ2_XXS, QuantType::IQ2_S, QuantType::IQ3_XXS, QuantType::IQ1_S}) {
        SCOPED_TRACE(quant_type_name(type));
        const IqGridSearch& g = iq_grid_search(type);
        const int n = g.levels_per_point;
        const auto value = [](int odd) { return static_cast<float>(odd); };
        Rng rng(7);
        int searched = 0;
        for (int u = 0; u < static_cast<int>(g.map.size()) && searched < 50; ++u) {
            if (g.map[u] >= 0) continue;
            ++searched;
            const uint16_t* list = g.neighbours.data() + (-g.map[u] - 1);
            float x[8], w[8];
            for (int i = 0; i < n; ++i) {
                x[i] = 6.0f * rng.next_float();
                w[i] = rng.next_float();
            }
            int8_t L[8];
            const int best = iq_best_neighbour(g, u, x, w, 1.0f, value, L);
            // The nearest by brute force over the list, and L its levels.
            float best_d2 = std::numeric_limits<float>::max();
            int expected = -1;
            for (int j = 1; j <= list[0]; ++j) {
                float d2 = 0.0f;
                for (int i = 0; i < n; ++i) {
                    const float diff = value(static_cast<int>((g.odd[list[j]] >> (8 * i)) & 0xFF)) - x[i];
                    d2 += w[i] * diff * diff;
                }
                if (d2 < best_d2) {
                    best_d2 = d2;
                    expected = list[j];
                }
            }
            ASSERT_EQ(best, expected);
            for (int i = 0; i < n; ++i) EXPECT_EQ(2 * L[i] + 1, static_cast<int>((g.odd[best] >> (8 * i)) & 0xFF));
            // NaN everywhere: the first neighbour.
            for (int i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
            EXPECT_EQ(iq_best_neighbour(g, u, x, w, std::numeric_limits<float>::quiet_NaN(), value, L), list[1]);
        }
        EXPECT_EQ(searched, 50);
    }
}

TEST(Quant, RoundTripErrorIsBounded) {
    for (QuantType type : kRowTypes) {
        const QuantTraits& t = *compute_traits(type);
        for (int64_t blocks : {1, 3, 7, 33}) {
            const int64_t n = blocks * 32;
            const std::vector<float> x = random_floats(n, 100 + static_cast<uint64_t>(n));
            Unaligned q(type, n);
            t.from_float(x.data(), q.p, n);
            std::vector<float> y(static_cast<size_t>(n));
            t.to_float(q.p, y.data(), n);
            for (int64_t b = 0; b < blocks; ++b) {
                float amax = 0.0f;
                for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
                // Q8_0 steps are amax/127: half a step of rounding plus fp16 scale
                // error. Q4_0 steps are amax/8, and a value of the opposite sign to
                // the extreme one clamps at code 15, losing up to a whole step.
                const float bound = type == QuantType::Q8_0   ? amax / 127.0f * 0.51f + amax * 1e-3f
                                    : type == QuantType::Q4_0 ? amax / 8.0f + amax * 1e-3f
                                    : type == QuantType::F16  ? amax * 1e-3f
                                                              : 0.0f;
                for (int i = 0; i < 32; ++i) {
                    ASSERT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), bound)
                        << quant_type_name(type) << " block " << b << " element " << i;
                }
            }
        }
    }
}

// vec_dot equals the dot product of the dequantized operands, for odd sizes
// and unaligned buffers.
TEST(Quant, VecDotMatchesDequantizedDot) {
    for (QuantType type : kRowTypes) {
        const QuantTraits& t = *compute_traits(type);
        const QuantTraits& xt = *compute_traits(t.vec_dot_type);
        for (int64_t blocks : {1, 2, 5, 31, 64}) {
            const int64_t n = blocks * 32;
            const std::vector<float> w = random_floats(n, 7 * static_cast<uint64_t>(n), 0.1f);
            const std::vector<float> x = random_floats(n, 11 * static_cast<uint64_t>(n));
            Unaligned wq(type, n), xq(t.vec_dot_type, n);
            t.from_float(w.data(), wq.p, n);
            xt.from_float(x.data(), xq.p, n);
            std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
            t.to_float(wq.p, wd.data(), n);
            xt.to_float(xq.p, xd.data(), n);
            double ref = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                ref += static_cast<double>(wd[i]) * xd[i];
                mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
            }
            const float got = t.vec_dot(n, wq.p, xq.p);
            EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-6) << quant_type_name(type) << " n=" << n;
        }
    }
}

// NVFP4's UE4M3 scales: every byte's value as ggml defines it (4 exponent
// bits of bias 7, 3 mantissa bits, subnormals below, 0x7F and bit 7 ignored,
// halved), and the quantizer's rounding lands every value on its own byte.
TEST(Quant, Ue4m3ScalesAreGgmls) {
    for (int b = 0; b < 256; ++b) {
        const int e = (b >> 3) & 0xF, m = b & 7;
        const float want = (b & 0x7F) == 0x7F ? 0.0f
                           : e == 0          ? std::ldexp(static_cast<float>(m), -9) * 0.5f
                                             : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7) * 0.5f;
        EXPECT_EQ(ue4m3_half_to_float(static_cast<uint8_t>(b)), want) << b;
        // (ggml's conversion sends exponent 15, values from 256 up, to 0x7E.)
        if (b > 0 && b < 0x78) EXPECT_EQ(ue4m3_from_float(2.0f * want), b) << b;
        if (b >= 0x78 && b < 0x7F) EXPECT_EQ(ue4m3_from_float(2.0f * want), 0x7E) << b;
    }
    EXPECT_EQ(ue4m3_from_float(0.0f), 0);
    EXPECT_EQ(ue4m3_from_float(-3.0f), 0);
    EXPECT_EQ(ue4m3_from_float(std::numeric_limits<float>::quiet_NaN()), 0);
    EXPECT_EQ(ue4m3_from_float(1e9f), 0x7E);                    // clamped to 448
    EXPECT_EQ(ue4m3_from_float(0.0004f), 0);                    // below half the least subnormal
    EXPECT_EQ(ue4m3_from_float(1.0f + 1.0f / 16.0f), 0x39);     // a tie rounds up: 1.125
    EXPECT_EQ(ue4m3_from_float(1.0f + 15.0f / 16.0f), 0x40);    // 1.9375 carries into 2.0
}

// Every sequence of 5 trits (and of 4, in qh) packs into a byte that gives it
// back: rows of -1, 0 and 1 (each block's scale 1) survive TQ1_0 exactly,
// whichever trits share a byte.
TEST(Quant, Tq1_0PacksEveryTritSequence) {
    constexpr int kBlocks = 8;
    std::vector<float> x(256 * kBlocks);
    for (int b = 0; b < kBlocks; ++b) {
        float* block = x.data() + 256 * b;
        // Trit t of a base-3 number, as -1, 0 or 1.
        const auto trits = [](int combo, int t) {
            for (int k = 0; k < t; ++k) combo /= 3;
            return static_cast<float>(combo % 3 - 1);
        };
        for (int m = 0; m < 32; ++m) {
            for (int t = 0; t < 5; ++t) block[m + 32 * t] = trits((32 * b + m) % 243, t);
        }
        for (int m = 0; m < 16; ++m) {
            for (int t = 0; t < 5; ++t) block[160 + m + 16 * t] = trits((16 * b + m + 100) % 243, t);
        }
        for (int j = 0; j < 4; ++j) {
            for (int t = 0; t < 4; ++t) block[240 + j + 4 * t] = trits((4 * b + j) % 81, t);
        }
        block[0] = 1.0f;  // the scale
    }
    const QuantTraits& tq1 = *scalar_traits(QuantType::TQ1_0);
    std::vector<uint8_t> q(54 * kBlocks);
    tq1.from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
    std::vector<float> back(x.size());
    tq1.to_float(q.data(), back.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], x[i]) << i;
}

// Byte-exact quantization of a known block, as llama.cpp's reference does it.
TEST(Quant, KnownBlocks) {
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 8.0f;  // -8 .. 23
    BlockQ8_0 q8{};
    compute_traits(QuantType::Q8_0)->from_float(x, &q8, 32);
    EXPECT_EQ(q8.d, fp32_to_fp16(23.0f / 127.0f));
    EXPECT_EQ(q8.qs[31], 127);
    EXPECT_EQ(q8.qs[0], static_cast<int8_t>(std::round(-8.0f * 127.0f / 23.0f)));
    EXPECT_EQ(q8.qs[8], 0);

    BlockQ4_0 q4{};
    compute_traits(QuantType::Q4_0)->from_float(x, &q4, 32);
    // The largest magnitude (23) maps to code 0, i.e. d = 23 / -8.
    EXPECT_EQ(q4.d, fp32_to_fp16(23.0f / -8.0f));
    EXPECT_EQ(q4.qs[15] >> 4, 0);  // element 31 = 23 -> code 0
    float y[32];
    compute_traits(QuantType::Q4_0)->to_float(&q4, y, 32);
    EXPECT_NEAR(y[31], 23.0f, 0.01f);
}

}  // namespace tessera
