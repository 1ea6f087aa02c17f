// matmul and matmul_many (the prefill path: vec_dot tiles over blocks of rows
// and positions) equal a vec_dot per (row, position) on every weight type,
// over rectangles with a column offset, odd row and position counts, with 1
// and 3 threads.
#include "ops/fixed_sum.h"
#include "ops/matmul.h"
#include "ops/row_groups.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace tessera {

namespace {

struct RandomMatrix {
    std::vector<uint8_t> bytes;
    Matrix m;
};

RandomMatrix random_matrix(QuantType type, int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    RandomMatrix t;
    t.m = {type, cols, rows, quant_row_bytes(type, cols), nullptr};
    t.bytes.resize(t.m.row_bytes * static_cast<uint64_t>(rows));
    t.m.data = t.bytes.data();
    std::vector<float> row(static_cast<size_t>(cols));
    const QuantTraits& traits = *compute_traits(type);
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = rng.next_normal() * 0.2f;
        traits.from_float(row.data(), t.bytes.data() + r * t.m.row_bytes, cols);
    }
    return t;
}

// y[t][r] by one vec_dot each, the definition matmul must meet.
std::vector<float> reference(const Matrix& w, const MatRect& rect, const QuantizedActivation& x) {
    const QuantTraits& traits = *compute_traits(w.type);
    const int64_t n_rows = rect.row_end - rect.row_begin;
    std::vector<float> y(static_cast<size_t>(x.n_rows() * n_rows));
    for (int64_t t = 0; t < x.n_rows(); ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
            y[t * n_rows + r] = traits.vec_dot(
                rect.n_cols, w.row(rect.row_begin + r) + quant_row_bytes(w.type, rect.col_begin), x.row(t));
        }
    }
    return y;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << what << " at " << i;
    }
}

}  // namespace

TEST(Matmul, EqualsOneDotPerRowAndPosition) {
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
        const int64_t rows = 53, cols = 32 * 6;
        const RandomMatrix w = random_matrix(type, rows, cols, 3);
        const QuantType vdt = compute_traits(type)->vec_dot_type;
        for (int n_tok : {1, 2, 67}) {
            for (const MatRect rect : {MatRect{0, rows, 0, cols}, MatRect{5, 47, 64, 96}, MatRect{52, 53, 160, 32}}) {
                Rng rng(11 + n_tok);
                std::vector<float> x(static_cast<size_t>(n_tok * rect.n_cols));
                for (auto& v : x) v = rng.next_normal();
                QuantizedActivation xq;
                xq.quantize(x.data(), rect.n_cols, vdt, n_tok);
                const std::vector<float> want = reference(w.m, rect, xq);
                for (int threads : {1, 3}) {
                    ThreadPool pool(threads);
                    std::vector<float> y(want.size(), NAN);
                    matmul(w.m, rect, xq, y.data(), rect.row_end - rect.row_begin, pool);
                    expect_close(y, want, quant_type_name(type));
                }
            }
        }
    }
}

// A router written as F32 from a BF16 checkpoint is held as BF16
// (llama_model.cpp): F32 rows whose values are all BF16 values give the bits
// of their BF16 copy, for one position and a batch, whole rows and a rect,
// with 1 and 3 threads (float products widen each weight to F32 first).
TEST(Matmul, F32RowsOfBf16ValuesGiveTheBitsOfTheirBf16Copy) {
    for (const int64_t cols : {int64_t{2048}, int64_t{2880}, int64_t{100}}) {
        const int64_t rows = 37;
        Rng rng(static_cast<uint64_t>(cols));
        std::vector<uint8_t> f32(static_cast<size_t>(rows * cols * 4)), bf16(static_cast<size_t>(rows * cols * 2));
        for (int64_t i = 0; i < rows * cols; ++i) {
            const float v = rng.next_normal() * 0.05f;
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            bits &= 0xffff0000u;
            std::memcpy(f32.data() + 4 * i, &bits, 4);
            const auto high = static_cast<uint16_t>(bits >> 16);
            std::memcpy(bf16.data() + 2 * i, &high, 2);
        }
        const Matrix wide{QuantType::F32, cols, rows, quant_row_bytes(QuantType::F32, cols), f32.data()};
        const Matrix narrow{QuantType::BF16_F32ACT, cols, rows, quant_row_bytes(QuantType::BF16_F32ACT, cols),
                            bf16.data()};
        ASSERT_EQ(compute_traits(QuantType::BF16_F32ACT)->vec_dot_type, compute_traits(QuantType::F32)->vec_dot_type);
        for (int n_tok : {1, 5, 40}) {
            std::vector<float> x(static_cast<size_t>(n_tok * cols));
            for (auto& v : x) v = rng.next_normal();
            QuantizedActivation xq;
            xq.quantize(x.data(), cols, compute_traits(QuantType::F32)->vec_dot_type, n_tok);
            for (const MatRect rect : {MatRect{0, rows, 0, cols}, MatRect{3, 30, 0, cols}}) {
                const int64_t n = rect.row_end - rect.row_begin;
                for (int threads : {1, 3}) {
                    ThreadPool pool(threads);
                    std::vector<float> a(static_cast<size_t>(n_tok * n)), b(a.size());
                    matmul(wide, rect, xq, a.data(), n, pool);
                    matmul(narrow, rect, xq, b.data(), n, pool);
                    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                        << cols << " columns, " << n_tok << " positions, " << threads << " threads";
                }
            }
        }
    }
}

// Three products of one activation in one parallel loop land each in its own
// output, with its own stride, exactly as three separate calls would: with
// one thread (a single chunk spans every job), two and three; for one
// position, a few, and more than a token block.
TEST(Matmul, ManyJobsEqualSeparateCalls) {
    const int64_t cols = 64;
    const RandomMatrix a = random_matrix(QuantType::Q4_0, 40, cols, 1);
    const RandomMatrix b = random_matrix(QuantType::Q8_0, 9, cols, 2);
    const RandomMatrix c = random_matrix(QuantType::Q4_0, 17, cols, 3);
    for (const auto& [n_tok, n_threads] : {std::pair{1, 1}, {1, 2}, {1, 3}, {5, 1}, {5, 3}, {70, 2}}) {
        SCOPED_TRACE(testing::Message() << n_tok << " positions, " << n_threads << " threads");
        Rng rng(5);
        std::vector<float> x(static_cast<size_t>(n_tok * cols));
        for (auto& v : x) v = rng.next_normal();
        QuantizedActivation xq;
        xq.quantize(x.data(), cols, QuantType::Q8_0, n_tok);
        ThreadPool pool(n_threads);
        std::vector<float> ya(static_cast<size_t>(n_tok * 40)), yb(static_cast<size_t>(n_tok * 9)),
            yc(static_cast<size_t>(n_tok * 20), -7.0f);
        const MatmulJob jobs[] = {{&a.m, {0, 40, 0, cols}, ya.data(), 40},
                                  {&b.m, {0, 9, 0, cols}, yb.data(), 9},
                                  {&c.m, {2, 17, 0, cols}, yc.data(), 20}};
        matmul_many(jobs, xq, pool);
        expect_close(ya, reference(a.m, jobs[0].rect, xq), "a");
        expect_close(yb, reference(b.m, jobs[1].rect, xq), "b");
        const std::vector<float> want_c = reference(c.m, jobs[2].rect, xq);  // 15 per position
        for (int t = 0; t < n_tok; ++t) {
            for (int r = 0; r < 15; ++r) ASSERT_NEAR(yc[t * 20 + r], want_c[t * 15 + r], 1e-4);
            for (int r = 15; r < 20; ++r) ASSERT_EQ(yc[t * 20 + r], -7.0f) << "wrote past its rows";
        }
    }
}

}  // namespace tessera

namespace tessera {

namespace {
// The columns [c0, c0 + n) of every row of x, quantized on their own.
QuantizedActivation columns(const std::vector<float>& x, int64_t cols, int n_tok, int64_t c0, int64_t n, QuantType type) {
    std::vector<float> part(static_cast<size_t>(n_tok * n));
    for (int t = 0; t < n_tok; ++t) {
        std::copy_n(x.begin() + t * cols + c0, n, part.begin() + t * n);
    }
    QuantizedActivation q;
    q.quantize(part.data(), n, type, n_tok);
    return q;
}
}  // namespace

// The grid unit dot products are summed on: multiples of 2^-32, clamped to
// +-2^16; NaN stays NaN (a broken model shows, rather than summing to a
// number).
TEST(FixedSum, SnapsToTheGridAndClamps) {
    EXPECT_EQ(snap_to_grid(1.5f), 1.5);
    EXPECT_EQ(snap_to_grid(-0.25f), -0.25);
    EXPECT_EQ(snap_to_grid(1e-10f), 0.0);  // below half a grid step (2^-33)
    EXPECT_EQ(snap_to_grid(3e-10f), std::ldexp(1.0, -32));
    EXPECT_EQ(snap_to_grid(1e6f), kGridLimit);
    EXPECT_EQ(snap_to_grid(-1e30f), -kGridLimit);
    EXPECT_EQ(snap_to_grid(std::numeric_limits<float>::infinity()), kGridLimit);
    EXPECT_TRUE(std::isnan(snap_to_grid(std::numeric_limits<float>::quiet_NaN())));
    const float v = 0.1234567f;
    const double s = snap_to_grid(v);
    EXPECT_EQ(s, std::nearbyint(static_cast<double>(v) * 4294967296.0) / 4294967296.0);
}

// A unit whose dot product passes the grid's limit saturates there, in the
// vector lanes of the per-row sums as in their scalar tail (21 rows: two
// vectors of 8 and 5 more), whichever sign.
TEST(Matmul, UnitSumsSaturate) {
    const int64_t rows = 21, cols = 96, unit = 32;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float sign = r % 2 == 0 ? 1.0f : -1.0f;
        for (int64_t c = 0; c < cols; ++c) w[r * cols + c] = sign * (c < unit ? 100.0f : 0.125f);
    }
    const Matrix m{QuantType::F32, cols, rows, cols * sizeof(float), reinterpret_cast<const uint8_t*>(w.data())};
    std::vector<float> x(static_cast<size_t>(cols), 50.0f);
    QuantizedActivation xq;
    xq.quantize(x.data(), cols, QuantType::F32);
    ThreadPool pool(1);
    std::vector<double> y(static_cast<size_t>(rows));
    matmul_units(m, {0, rows, 0, cols}, xq, unit, y.data(), rows, pool);
    for (int64_t r = 0; r < rows; ++r) {
        // Unit 0: 32 x 100 x 50 = 160000, clamped; units 1 and 2: 200 each.
        const double want = (r % 2 == 0 ? 1.0 : -1.0) * (kGridLimit + 2 * 200.0);
        ASSERT_EQ(y[r], want) << r;
    }
}

// Exact unit sums (the exact tensor-parallel reduction): close to one
// float dot per unit, and any split of the columns at unit boundaries sums
// to the whole matrix's result bit for bit, whatever the threads.
TEST(Matmul, UnitSumsAreSplitInvariant) {
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K}) {
        const int64_t rows = 37, cols = 1024;
        const int64_t unit = type == QuantType::Q4_K ? 256 : 64;
        const RandomMatrix w = random_matrix(type, rows, cols, 5);
        const QuantTraits& traits = *compute_traits(type);
        for (int n_tok : {1, 2, 67}) {
            Rng rng(21 + n_tok);
            std::vector<float> x(static_cast<size_t>(n_tok * cols));
            for (auto& v : x) v = rng.next_normal();
            const QuantizedActivation whole = columns(x, cols, n_tok, 0, cols, traits.vec_dot_type);
            const size_t n_out = static_cast<size_t>(n_tok * rows);
            for (int threads : {1, 3}) {
                ThreadPool pool(threads);
                std::vector<double> y(n_out);
                matmul_units(w.m, {0, rows, 0, cols}, whole, unit, y.data(), rows, pool);
                // Against one float dot per unit.
                for (int t = 0; t < n_tok; ++t) {
                    for (int64_t r = 0; r < rows; ++r) {
                        double want = 0.0;
                        for (int64_t c = 0; c < cols; c += unit) {
                            want += traits.vec_dot(unit, w.m.row(r) + quant_row_bytes(type, c),
                                                   whole.row(t) + quant_row_bytes(traits.vec_dot_type, c));
                        }
                        ASSERT_NEAR(y[t * rows + r], want, 1e-4 * (1.0 + std::fabs(want)))
                            << quant_type_name(type) << " t=" << t << " r=" << r;
                    }
                }
                // Three ranks' column ranges (uneven, at unit boundaries).
                std::vector<double> sum(n_out, 0.0);
                for (const auto& [c0, n] : {std::pair<int64_t, int64_t>{0, unit}, {unit, 2 * unit},
                                            {3 * unit, cols - 3 * unit}}) {
                    const QuantizedActivation part = columns(x, cols, n_tok, c0, n, traits.vec_dot_type);
                    std::vector<double> yp(n_out);
                    matmul_units(w.m, {0, rows, c0, n}, part, unit, yp.data(), rows, pool);
                    for (size_t i = 0; i < n_out; ++i) sum[i] += yp[i];
                }
                ASSERT_EQ(sum, y) << quant_type_name(type) << " n_tok=" << n_tok << " threads=" << threads;
            }
        }
        // A rect that does not start a unit is refused.
        ThreadPool pool(1);
        const QuantizedActivation part = columns(std::vector<float>(static_cast<size_t>(cols), 1.0f), cols, 1, 256,
                                                 cols - 256, traits.vec_dot_type);
        std::vector<double> y(static_cast<size_t>(rows));
        EXPECT_THROW(matmul_units(w.m, {0, rows, 256, cols - 256}, part, 192, y.data(), rows, pool), Error);
    }
}

// NVFP4 files' factors (Matrix::out_scale, a job's scale): every dot product
// times the factors, rounded once, as a product's last step; in column units
// each unit's float before it is snapped, so that ranks holding some of the
// units still add up to the whole product's bits.
TEST(Matmul, FactorsScaleEachDotAndEachUnitBeforeItIsSnapped) {
    for (QuantType type : {QuantType::Q8_0, QuantType::NVFP4}) {
        const int64_t rows = 37, cols = 1024, unit = 128;
        const RandomMatrix rows_w = random_matrix(type, rows, cols, 9);
        // In row layout and in groups of 16 rows (two panels), whose kernels
        // write every unit of a run of rows at once.
        std::vector<uint8_t> group_bytes;
        Matrix groups = rows_w.m;
        const GroupPanels panels{type, cols, 4 * unit, (rows + kGroupRows - 1) / kGroupRows};
        group_bytes.resize(panels.total_bytes());
        group_matrix(panels, rows_w.m.data, rows_w.m.row_bytes, rows, group_bytes.data());
        groups.data = group_bytes.data();
        groups.grouped = true;
        groups.panel_cols = panels.panel_cols;
      for (const Matrix* layout : {&rows_w.m, static_cast<const Matrix*>(&groups)}) {
        RandomMatrix w{{}, *layout};
        Matrix scaled_w = w.m;
        scaled_w.out_scale = 0.37f;
        const float job_scale = 1.9f;
        const QuantTraits& traits = *compute_traits(type);
        for (int n_tok : {1, 5}) {
            Rng rng(41 + n_tok);
            std::vector<float> x(static_cast<size_t>(n_tok * cols));
            for (auto& v : x) v = rng.next_normal();
            const QuantizedActivation whole = columns(x, cols, n_tok, 0, cols, traits.vec_dot_type);
            const size_t n_out = static_cast<size_t>(n_tok * rows);
            ThreadPool pool(2);
            std::vector<float> plain(n_out), scaled(n_out);
            matmul(w.m, {0, rows, 0, cols}, whole, plain.data(), rows, pool);
            const MatmulJob job{&scaled_w, {0, rows, 0, cols}, scaled.data(), rows, job_scale};
            matmul_many(std::span<const MatmulJob>(&job, 1), whole, pool);
            for (size_t i = 0; i < n_out; ++i) ASSERT_EQ(scaled[i], plain[i] * (0.37f * job_scale)) << i;

            std::vector<double> units(n_out), units_plain(n_out);
            matmul_units(w.m, {0, rows, 0, cols}, whole, unit, units_plain.data(), rows, pool);
            matmul_units(scaled_w, {0, rows, 0, cols}, whole, unit, units.data(), rows, pool, job_scale);
            std::vector<double> sum(n_out, 0.0);
            for (const auto& [c0, n] : {std::pair<int64_t, int64_t>{0, unit}, {unit, 3 * unit}, {4 * unit, cols - 4 * unit}}) {
                const QuantizedActivation part = columns(x, cols, n_tok, c0, n, traits.vec_dot_type);
                std::vector<double> yp(n_out);
                matmul_units(scaled_w, {0, rows, c0, n}, part, unit, yp.data(), rows, pool, job_scale);
                for (size_t i = 0; i < n_out; ++i) sum[i] += yp[i];
            }
            ASSERT_EQ(sum, units) << quant_type_name(type) << " n_tok " << n_tok;
            for (size_t i = 0; i < n_out; ++i) {
                ASSERT_NEAR(units[i], units_plain[i] * 0.37 * job_scale, 1e-6 * (1.0 + std::fabs(units[i]))) << i;
            }
            if (n_tok == 1) {
                // A job's factor in matmul_units_many, as matmul_units'.
                std::vector<double> many(static_cast<size_t>(rows));
                const UnitsJob band{{0, rows, 0, cols}, 0, many.data(), job_scale};
                matmul_units_many(scaled_w, std::span<const UnitsJob>(&band, 1), whole, unit, pool);
                EXPECT_EQ(many, units);
            }
        }
      }
    }
}

// Several bands of one matrix, each against its own position of a shared
// activation, in one parallel loop: each row's bits are matmul_units' with
// that position alone (a mixture of experts' down products for one token).
TEST(Matmul, UnitProductsOfManyBandsEqualEachAlone) {
    for (QuantType type : {QuantType::F32, QuantType::Q8_0, QuantType::Q4_K}) {
        const int64_t rows = 48, cols = 1024;
        const int64_t unit = type == QuantType::Q4_K ? 256 : 64;
        const RandomMatrix w = random_matrix(type, rows, cols, 6);
        const QuantTraits& traits = *compute_traits(type);
        Rng rng(31);
        std::vector<float> x(static_cast<size_t>(3 * cols));
        for (auto& v : x) v = rng.next_normal();
        const QuantizedActivation all = columns(x, cols, 3, 0, cols, traits.vec_dot_type);
        const MatRect bands[] = {{0, 16, 0, cols}, {16, 48, 0, cols}, {5, 30, 0, cols}, {0, 48, 0, cols}};
        const int64_t x_rows[] = {2, 0, 1, 1};
        for (int threads : {1, 3}) {
            ThreadPool pool(threads);
            std::vector<std::vector<double>> got(4);
            std::vector<UnitsJob> jobs;
            for (int i = 0; i < 4; ++i) {
                got[static_cast<size_t>(i)].assign(static_cast<size_t>(bands[i].row_end - bands[i].row_begin), 0.0);
                jobs.push_back({bands[i], x_rows[i], got[static_cast<size_t>(i)].data()});
            }
            matmul_units_many(w.m, jobs, all, unit, pool);
            for (int i = 0; i < 4; ++i) {
                const std::vector<float> row(x.begin() + x_rows[i] * cols, x.begin() + (x_rows[i] + 1) * cols);
                const QuantizedActivation alone = columns(row, cols, 1, 0, cols, traits.vec_dot_type);
                std::vector<double> want(got[static_cast<size_t>(i)].size());
                matmul_units(w.m, bands[i], alone, unit, want.data(), 0, pool);
                EXPECT_EQ(got[static_cast<size_t>(i)], want) << quant_type_name(type) << " band " << i;
            }
        }
    }
}

}  // namespace tessera
