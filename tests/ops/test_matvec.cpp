#include "ops/activation.h"
#include "ops/matvec.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/softmax.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace tessera {

namespace {

struct TestMatrix {
    std::vector<uint8_t> bytes;
    Matrix m;
    std::vector<float> dequantized;  // rows * cols
};

TestMatrix make_matrix(QuantType type, int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    TestMatrix t;
    t.m.type = type;
    t.m.rows = rows;
    t.m.cols = cols;
    t.m.row_bytes = quant_row_bytes(type, cols);
    t.bytes.resize(t.m.row_bytes * static_cast<uint64_t>(rows));
    t.m.data = t.bytes.data();
    std::vector<float> row(static_cast<size_t>(cols));
    t.dequantized.resize(static_cast<size_t>(rows * cols));
    const QuantTraits& traits = *compute_traits(type);
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = rng.next_normal() * 0.2f;
        traits.from_float(row.data(), t.bytes.data() + r * t.m.row_bytes, cols);
        traits.to_float(t.bytes.data() + r * t.m.row_bytes, t.dequantized.data() + r * cols, cols);
    }
    return t;
}

}  // namespace

// A matvec over any block-aligned rectangle equals the naive product of the
// dequantized weights and the converted activation, with 1 or 3 threads.
TEST(Matvec, RectanglesMatchNaiveProduct) {
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
        const int64_t rows = 37, cols = 32 * 6;
        const TestMatrix t = make_matrix(type, rows, cols, 5);
        Rng rng(9);
        std::vector<float> x(static_cast<size_t>(cols));
        for (auto& v : x) v = rng.next_normal();
        const QuantTraits& traits = *compute_traits(type);
        for (int threads : {1, 3}) {
            ThreadPool pool(threads);
            for (const MatRect rect : {MatRect{0, rows, 0, cols}, MatRect{5, 30, 64, 96}, MatRect{36, 37, 160, 32}}) {
                QuantizedActivation xq;
                xq.quantize(x.data() + rect.col_begin, rect.n_cols, traits.vec_dot_type);
                std::vector<float> xd(static_cast<size_t>(rect.n_cols));
                compute_traits(traits.vec_dot_type)->to_float(xq.at(0), xd.data(), rect.n_cols);
                std::vector<float> y(static_cast<size_t>(rect.row_end - rect.row_begin));
                matvec(t.m, rect, xq, y.data(), pool);
                for (int64_t r = rect.row_begin; r < rect.row_end; ++r) {
                    double ref = 0.0;
                    for (int64_t c = 0; c < rect.n_cols; ++c) {
                        ref += static_cast<double>(t.dequantized[r * cols + rect.col_begin + c]) * xd[c];
                    }
                    ASSERT_NEAR(y[r - rect.row_begin], ref, 1e-4) << quant_type_name(type) << " row " << r;
                }
            }
        }
    }
}

TEST(Matvec, RejectsMismatchedActivation) {
    const TestMatrix t = make_matrix(QuantType::Q4_0, 4, 64, 1);
    ThreadPool pool(1);
    std::vector<float> x(64, 1.0f), y(4);
    QuantizedActivation xq;
    xq.quantize(x.data(), 64, QuantType::F32);  // Q4_0 needs a Q8_0 activation
    EXPECT_THROW(matvec(t.m, xq, y.data(), pool), Error);
}

// An activation converted in spans (as threads convert their parts of a row
// while the values are in cache), in any order, equals one converted whole:
// the same bytes and Q8_0 block sums. Spans off the blocks are refused.
TEST(QuantizedActivation, SpansEqualTheWholeConversion) {
    for (QuantType type : {QuantType::F32, QuantType::Q8_0, QuantType::Q8_K}) {
        const int64_t block = layout_of(type).block_size == 1 ? 32 : layout_of(type).block_size;
        const int64_t n = 7 * block, rows = 3;
        Rng rng(12);
        std::vector<float> x(static_cast<size_t>(n * rows));
        for (auto& v : x) v = rng.next_normal();
        QuantizedActivation whole, parts;
        whole.quantize(x.data(), n, type, rows);
        parts.prepare(n, type, rows);
        // Spans of 1, 2 and 4 blocks, last row first.
        for (int64_t r = rows - 1; r >= 0; --r) {
            for (const auto& [b0, b1] : {std::pair<int64_t, int64_t>{3, 7}, {0, 1}, {1, 3}}) {
                parts.quantize_span(x.data() + r * n, r, b0 * block, b1 * block);
            }
        }
        ASSERT_EQ(parts.row_bytes(), whole.row_bytes());
        ASSERT_EQ(parts.n_rows(), rows);
        for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(0, std::memcmp(parts.row(r), whole.row(r), whole.row_bytes())) << quant_type_name(type) << " " << r;
            if (type != QuantType::Q8_0) continue;
            for (int64_t b = 0; b < n / 32; ++b) ASSERT_EQ(parts.block_sums(r)[b], whole.block_sums(r)[b]) << r << " " << b;
        }
        if (block > 1 && type != QuantType::F32) {
            EXPECT_THROW(parts.quantize_span(x.data(), 0, 1, block), Error);
            EXPECT_THROW(parts.quantize_span(x.data(), 0, 0, n + block), Error);
            EXPECT_THROW(parts.quantize_span(x.data(), rows, 0, block), Error);
            EXPECT_THROW(parts.prepare(n + 1, type), Error);
        }
    }
}

TEST(Ops, RmsNormMatchesDefinition) {
    Rng rng(3);
    std::vector<float> x(67), w(67), out(67);
    for (auto& v : x) v = rng.next_normal() * 3.0f;
    for (auto& v : w) v = rng.next_normal();
    rms_norm(x.data(), w.data(), 67, 1e-5f, out.data());
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / 67 + 1e-5);
    for (int i = 0; i < 67; ++i) EXPECT_NEAR(out[i], x[i] * scale * w[i], 1e-5);
}

TEST(Ops, SoftmaxIsStableAndNormalized) {
    std::vector<float> x = {1000.0f, 1001.0f, 999.0f, -1e30f};
    softmax(x.data(), 4);
    double sum = 0.0;
    for (float v : x) {
        EXPECT_TRUE(std::isfinite(v));
        sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_GT(x[1], x[0]);
    EXPECT_NEAR(x[1] / x[0], std::exp(1.0), 1e-4);
}

TEST(Ops, RopeRotatesPairsAndKeepsNorms) {
    const int head_dim = 8;
    RopeTable rope(6, 10000.0f);  // rotate only the first 6 of 8
    std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
    const std::vector<float> orig = x;
    rope.set_position(0);
    rope.apply(x.data(), 1, head_dim);
    EXPECT_EQ(x, orig);  // position 0 is the identity
    rope.set_position(3);
    rope.apply(x.data(), 1, head_dim);
    // Pair 0 turns by 3 radians (frequency 1).
    EXPECT_NEAR(x[0], std::cos(3.0) * 1 - std::sin(3.0) * 2, 1e-5);
    EXPECT_NEAR(x[1], std::sin(3.0) * 1 + std::cos(3.0) * 2, 1e-5);
    for (int i = 0; i < 6; i += 2) {
        EXPECT_NEAR(std::hypot(x[i], x[i + 1]), std::hypot(orig[i], orig[i + 1]), 1e-5);
    }
    EXPECT_EQ(x[6], 7.0f);  // beyond n_rot: untouched
    EXPECT_EQ(x[7], 8.0f);
}

// The halves layout (NEOX) rotates (x[i], x[i + n_rot/2]), and with linear
// scaling a position turns by pos * scale * frequency: both are the adjacent
// layout's rotation with the elements gathered differently.
TEST(Ops, RopeHalvesLayoutAndLinearScaling) {
    const int head_dim = 8, n_rot = 6;
    RopeTable adjacent(n_rot, 500.0f, {}, RopeLayout::kAdjacent);
    RopeTable halves(n_rot, 500.0f, {}, RopeLayout::kHalves, 0.25f);
    const std::vector<float> orig = {1, 2, 3, 4, 5, 6, 7, 8};
    // The halves layout's pairs (0,3), (1,4), (2,5) gathered side by side.
    std::vector<float> gathered = {1, 4, 2, 5, 3, 6, 7, 8};
    std::vector<float> x = orig;
    adjacent.set_position(3);  // 3 = 12 * 0.25
    adjacent.apply(gathered.data(), 1, head_dim);
    halves.set_position(12);
    halves.apply(x.data(), 1, head_dim);
    for (int i = 0; i < n_rot / 2; ++i) {
        EXPECT_NEAR(x[i], gathered[2 * i], 1e-5) << i;
        EXPECT_NEAR(x[i + n_rot / 2], gathered[2 * i + 1], 1e-5) << i;
    }
    EXPECT_EQ(x[6], 7.0f);
    EXPECT_EQ(x[7], 8.0f);
}

// YaRN as ggml's rope computes it, pair by pair in float: each pair's angle
// blends the scaled and the original angle by the ramp between the
// correction dims; cos and sin grow by 1 + 0.1 ln(factor).
TEST(Ops, RopeYarnMatchesGgmlsFormula) {
    const int n_rot = 64, orig_ctx = 4096;
    const float base = 150000.0f, factor = 32.0f, beta_fast = 32.0f, beta_slow = 1.0f;
    RopeYarn yarn;
    yarn.orig_ctx = orig_ctx;
    RopeTable table(n_rot, base, {}, RopeLayout::kHalves, 1.0f / factor, yarn);
    const auto corr = [&](float rotations) {
        return n_rot * std::log(orig_ctx / (rotations * 2 * 3.14159265358979f)) / (2 * std::log(base));
    };
    const float low = std::max(0.0f, std::floor(corr(beta_fast)));
    const float high = std::min(static_cast<float>(n_rot - 1), std::ceil(corr(beta_slow)));
    ASSERT_LT(low, high);  // some pairs on each side of the ramp, some on it
    ASSERT_GT(low, 0.0f);
    ASSERT_LT(high, n_rot / 2 - 1.0f);
    const float mscale = 1.0f + 0.1f * std::log(factor);
    for (const int64_t pos : {1, 7, 1000, 100000}) {
        table.set_position(pos);
        std::vector<float> x(n_rot, 0.0f);
        for (int i = 0; i < n_rot / 2; ++i) x[static_cast<size_t>(i)] = 1.0f;  // pair i = (1, 0): gives (cos, sin)
        table.apply(x.data(), 1, n_rot);
        for (int i = 0; i < n_rot / 2; ++i) {
            const double extrap = static_cast<double>(pos) * std::pow(static_cast<double>(base), -2.0 * i / n_rot);
            const double interp = extrap / factor;
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, static_cast<double>(high - low))));
            const double theta = interp * (1.0 - ramp) + extrap * ramp;
            // Float angles of 1e5 radians lose ~1e-3 in ggml's float cache; ours is exact.
            EXPECT_NEAR(x[static_cast<size_t>(i)], std::cos(theta) * mscale, 1e-4) << pos << " pair " << i;
            EXPECT_NEAR(x[static_cast<size_t>(i + n_rot / 2)], std::sin(theta) * mscale, 1e-4) << pos << " pair " << i;
        }
    }
}

TEST(Ops, SwigluMatchesDefinition) {
    std::vector<float> g = {-2.0f, 0.0f, 1.5f}, u = {3.0f, 4.0f, -1.0f};
    swiglu(g.data(), u.data(), 3);
    EXPECT_NEAR(g[0], -2.0 / (1 + std::exp(2.0)) * 3.0, 1e-6);
    EXPECT_EQ(g[1], 0.0f);
    EXPECT_NEAR(g[2], 1.5 / (1 + std::exp(-1.5)) * -1.0, 1e-6);
}

}  // namespace tessera
