// Weights in groups of 16 rows (ops/row_groups.h): grouping keeps every row's
// bytes, the grouped kernels of every target that has one match the scalar
// reference on random data (odd block counts, any number of columns,
// unaligned activations), and matmul over a grouped matrix gives what it gives
// over the row layout, with rows computed the same bits whichever rect (and
// so whichever slice) they are computed in.
#include "ops/dot_kernels.h"
#include "ops/matmul.h"
#include "ops/quant_blocks.h"
#include "ops/row_groups.h"
#include "util/rng.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

// rows x n random Q4_0 weights in row layout.
std::vector<uint8_t> random_rows(int64_t rows, int64_t n, Rng& rng) {
    const uint64_t row_bytes = quant_row_bytes(QuantType::Q4_0, n);
    std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : x) v = rng.next_normal();
        scalar_traits(QuantType::Q4_0)->from_float(x.data(), bytes.data() + r * row_bytes, n);
    }
    return bytes;
}

// The same rows grouped, the last group padded.
std::vector<uint8_t> grouped(const std::vector<uint8_t>& rows, int64_t n_rows, int64_t n) {
    const uint64_t row_bytes = quant_row_bytes(QuantType::Q4_0, n);
    const int64_t n_groups = (n_rows + kGroupRows - 1) / kGroupRows;
    std::vector<uint8_t> out(row_bytes * kGroupRows * static_cast<uint64_t>(n_groups));
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t in_group = std::min<int64_t>(kGroupRows, n_rows - g * kGroupRows);
        group_rows(QuantType::Q4_0, rows.data() + g * kGroupRows * row_bytes, row_bytes, static_cast<int>(in_group),
                   n, out.data() + g * kGroupRows * row_bytes);
    }
    return out;
}

}  // namespace

TEST(RowGroups, GroupsKeepEveryRowsBytesAndPadWithZeroRows) {
    Rng rng(5);
    for (int64_t blocks : {1, 3, 64}) {
        const int64_t n = blocks * 32;
        const uint64_t row_bytes = quant_row_bytes(QuantType::Q4_0, n);
        for (int rows : {1, 7, 15, 16}) {
            const auto plain = random_rows(rows, n, rng);
            std::vector<uint8_t> group(row_bytes * kGroupRows, 0xAB);
            group_rows(QuantType::Q4_0, plain.data(), row_bytes, rows, n, group.data());
            std::vector<uint8_t> row(row_bytes), zero(row_bytes, 0);
            for (int r = 0; r < kGroupRows; ++r) {
                ungroup_row(QuantType::Q4_0, group.data(), n, r, row.data());
                if (r < rows) {
                    ASSERT_EQ(std::memcmp(row.data(), plain.data() + r * row_bytes, row_bytes), 0) << r;
                } else {
                    ASSERT_EQ(row, zero) << "padding row " << r;
                }
            }
        }
    }
    EXPECT_TRUE(has_group_layout(QuantType::Q4_0));
    EXPECT_FALSE(has_group_layout(QuantType::Q8_0));
}

TEST(RowGroups, ActivationsCarryTheirBlockSums) {
    Rng rng(6);
    std::vector<float> x(3 * 96);
    for (float& v : x) v = rng.next_normal();
    QuantizedActivation a;
    a.quantize(x.data(), 96, QuantType::Q8_0, 3);
    ASSERT_EQ(a.sums_stride(), 3);
    for (int64_t t = 0; t < 3; ++t) {
        for (int64_t b = 0; b < 3; ++b) {
            int32_t sum = 0;
            for (int i = 0; i < 32; ++i) sum += static_cast<int8_t>(a.row(t)[b * 34 + 2 + i]);
            EXPECT_EQ(a.block_sums(t)[b], sum) << t << " " << b;
        }
    }
}

TEST(RowGroups, GroupedKernelsMatchTheReferenceOnEveryTarget) {
    int tested = 0;
    for (int64_t target : simd_block_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        const QuantTraits& simd = *simd_block_traits(QuantType::Q4_0);
        if (simd.vec_dot_groups == nullptr) continue;
        ++tested;
        Rng rng(7);
        for (int64_t blocks : {1, 2, 3, 7, 64, 65}) {
            const int64_t n = blocks * 32;
            const uint64_t row_bytes = quant_row_bytes(QuantType::Q4_0, n);
            for (int n_groups : {1, 3}) {
                const auto plain = random_rows(n_groups * kGroupRows, n, rng);
                const auto w = grouped(plain, n_groups * kGroupRows, n);
                for (int cols : {1, 2, 3, 7, 8, 9, 17}) {
                    // Activations strided and off alignment, with their sums.
                    const uint64_t x_row = quant_row_bytes(QuantType::Q8_0, n);
                    const size_t x_stride = x_row + 5, x_off = 3;
                    std::vector<uint8_t> x(x_off + cols * x_stride);
                    std::vector<int32_t> sums(static_cast<size_t>(cols * blocks));
                    std::vector<float> v(static_cast<size_t>(n));
                    for (int c = 0; c < cols; ++c) {
                        for (float& f : v) f = rng.next_normal();
                        uint8_t* xc = x.data() + x_off + c * x_stride;
                        scalar_traits(QuantType::Q8_0)->from_float(v.data(), xc, n);
                        for (int64_t b = 0; b < blocks; ++b) {
                            for (int i = 0; i < 32; ++i) sums[c * blocks + b] += static_cast<int8_t>(xc[b * 34 + 2 + i]);
                        }
                    }
                    const size_t y_stride = static_cast<size_t>(n_groups * kGroupRows) + 1;
                    std::vector<float> want(cols * y_stride, -1.0f), got(want.size(), -1.0f);
                    vec_dot_groups_reference(QuantType::Q4_0, n, w.data(), kGroupRows * row_bytes, n_groups,
                                             x.data() + x_off, x_stride, cols, want.data(), y_stride);
                    simd.vec_dot_groups(n, w.data(), kGroupRows * row_bytes, n_groups, x.data() + x_off, x_stride,
                                        sums.data(), static_cast<size_t>(blocks), cols, got.data(), y_stride);
                    for (size_t i = 0; i < got.size(); ++i) {
                        const bool padding = i % y_stride == y_stride - 1;
                        ASSERT_NEAR(got[i], want[i], padding ? 0.0 : 1e-5 * (std::fabs(want[i]) + n) + 1e-6)
                            << hwy::TargetName(target) << " n " << n << " groups " << n_groups << " cols " << cols
                            << " at " << i;
                    }
                }
            }
        }
    }
    hwy::SetSupportedTargetsForTest(0);
    std::fprintf(stderr, "%d target(s) with a grouped Q4_0 kernel\n", tested);
    // This CPU's best target is tested when it has AVX-512 VNNI.
    if ((hwy::SupportedTargets() & HWY_AVX3_DL) != 0) {
        EXPECT_GT(tested, 0);
    }
}

TEST(RowGroups, MatmulOverGroupsEqualsRowsAndDoesNotDependOnTheRect) {
    if (compute_traits(QuantType::Q4_0)->vec_dot_groups == nullptr) GTEST_SKIP() << "no grouped kernel on this CPU";
    Rng rng(8);
    const int64_t rows = 75, cols = 160;  // 4 groups and a padded fifth
    auto plain_bytes = random_rows(rows, cols, rng);
    auto grouped_bytes = grouped(plain_bytes, rows, cols);
    Matrix plain{QuantType::Q4_0, cols, rows, quant_row_bytes(QuantType::Q4_0, cols), plain_bytes.data()};
    plain.row_begin = 40;  // a slice's rows: groups count from its first row
    Matrix groups = plain;
    groups.data = grouped_bytes.data();
    groups.grouped = true;
    ThreadPool pool(2);
    for (int n_tok : {1, 5, 70}) {
        std::vector<float> xs(static_cast<size_t>(n_tok * cols));
        for (float& v : xs) v = rng.next_normal();
        QuantizedActivation x;
        x.quantize(xs.data(), cols, QuantType::Q8_0, n_tok);
        const MatRect whole{40, 115, 0, cols};
        std::vector<float> from_rows(static_cast<size_t>(n_tok * rows)), from_groups(from_rows.size());
        matmul(plain, whole, x, from_rows.data(), rows, pool);
        matmul(groups, whole, x, from_groups.data(), rows, pool);
        for (size_t i = 0; i < from_rows.size(); ++i) {
            ASSERT_NEAR(from_groups[i], from_rows[i], 1e-4 * (1.0 + std::fabs(from_rows[i]))) << n_tok << " " << i;
        }
        // Rects that start and end inside groups give the whole's bits.
        for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{43, 61}, {56, 72}, {100, 115}, {41, 42}}) {
            const int64_t n = r1 - r0;
            std::vector<float> part(static_cast<size_t>(n_tok * n));
            matmul(groups, {r0, r1, 0, cols}, x, part.data(), n, pool);
            for (int t = 0; t < n_tok; ++t) {
                for (int64_t r = 0; r < n; ++r) {
                    ASSERT_EQ(part[t * n + r], from_groups[t * rows + (r0 - 40) + r]) << r0 << " row " << r;
                }
            }
        }
        // Column units (the tensor-parallel partials): columns [64, 160) in
        // units of 32, over groups as over rows, and over part of the rows.
        QuantizedActivation xc;
        xc.quantize(xs.data() + 64, 96, QuantType::Q8_0, n_tok, cols);
        std::vector<double> units_rows(static_cast<size_t>(n_tok * rows)), units_groups(units_rows.size());
        matmul_units(plain, {40, 115, 64, 96}, xc, 32, units_rows.data(), rows, pool);
        matmul_units(groups, {40, 115, 64, 96}, xc, 32, units_groups.data(), rows, pool);
        for (size_t i = 0; i < units_rows.size(); ++i) {
            ASSERT_NEAR(units_groups[i], units_rows[i], 1e-4 * (1.0 + std::fabs(units_rows[i]))) << n_tok << " " << i;
        }
        std::vector<double> units_part(static_cast<size_t>(n_tok * 20));
        matmul_units(groups, {50, 70, 64, 96}, xc, 32, units_part.data(), 20, pool);
        for (int t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < 20; ++r) ASSERT_EQ(units_part[t * 20 + r], units_groups[t * rows + 10 + r]) << r;
        }
    }
}

}  // namespace tessera
