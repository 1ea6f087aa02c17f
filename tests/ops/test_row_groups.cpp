// Weights in groups of 16 rows (ops/row_groups.h), every quant type, F16 and BF16: grouping
// keeps every row's bytes, the grouped kernels of every target that has one
// match the scalar reference on random data (odd block counts, any number of
// columns, unaligned activations), and matmul over a grouped matrix gives what
// it gives over the row layout, with rows computed the same bits whichever
// rect (and so whichever slice) they are computed in.

// kquants_hwy.cpp's target set, so that Q4_K's loop visits each of its targets.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#define HWY_WANT_AVX3_DL
#include <hwy/targets.h>

#include "ops/int8_dot_extension.h"
#include "ops/dot_kernels.h"
#include "ops/kquants_hwy.h"
#include "ops/matmul.h"
#include "ops/row_groups.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

namespace {

constexpr QuantType kGroupedTypes[] = {QuantType::Q4_0,    QuantType::Q8_0,    QuantType::Q4_K,   QuantType::Q5_K,
                                       QuantType::Q6_K,    QuantType::IQ4_XS,  QuantType::Q4_1,   QuantType::Q5_0,
                                       QuantType::Q5_1,    QuantType::IQ4_NL,  QuantType::MXFP4,  QuantType::Q2_K,
                                       QuantType::Q3_K,    QuantType::IQ2_XXS, QuantType::IQ2_XS, QuantType::IQ2_S,
                                       QuantType::IQ3_XXS, QuantType::IQ3_S,   QuantType::IQ1_S,  QuantType::IQ1_M,
                                       QuantType::Q1_0,    QuantType::NVFP4, QuantType::Q2_0,
                                       QuantType::TQ1_0,   QuantType::TQ2_0,   QuantType::F16,    QuantType::BF16};

bool is_kquant(QuantType type) { return layout_of(type).block_size == 256; }

// Elements per block of the group layout (F16: a 16-element piece).
int block_of(QuantType type) { return static_cast<int>(group_block_size(type)); }

// F16 and BF16 keep 16 float lanes per row that no sum resumes: one panel
// only, and a grouped kernel only where 512-bit registers hold a group's
// lanes (BF16: where vdpbf16ps runs).
bool is_float(QuantType type) { return type == QuantType::F16 || type == QuantType::BF16; }

// rows x n random weights of `type` in row layout (quantized Gaussians; Q8_0
// with some codes at the extremes, -128 included).
std::vector<uint8_t> random_rows(QuantType type, int64_t rows, int64_t n, Rng& rng) {
    const uint64_t row_bytes = quant_row_bytes(type, n);
    std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
        for (float& v : x) v = rng.next_normal();
        uint8_t* row = bytes.data() + r * row_bytes;
        scalar_traits(type)->from_float(x.data(), row, n);
        if (type != QuantType::Q8_0) continue;
        for (int64_t b = 0; b < n / 32; ++b) {
            row[b * 34 + 2 + rng.next_u64() % 32] = 0x80;  // -128
            row[b * 34 + 2 + rng.next_u64() % 32] = 0x7F;  // 127
        }
    }
    return bytes;
}

// The same rows grouped, the last group padded.
std::vector<uint8_t> grouped(QuantType type, const std::vector<uint8_t>& rows, int64_t n_rows, int64_t n) {
    const uint64_t row_bytes = quant_row_bytes(type, n);
    const int64_t n_groups = (n_rows + kGroupRows - 1) / kGroupRows;
    std::vector<uint8_t> out(group_bytes(type, n) * static_cast<uint64_t>(n_groups));
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t in_group = std::min<int64_t>(kGroupRows, n_rows - g * kGroupRows);
        group_rows(type, rows.data() + g * kGroupRows * row_bytes, row_bytes, static_cast<int>(in_group), n,
                   out.data() + g * group_bytes(type, n));
    }
    return out;
}

// The traits of the forced target (dot_hwy.cpp's, kquants_hwy.cpp's or
// iq_grids_hwy.cpp's, as the engine picks them).
const QuantTraits& simd_traits(QuantType type) { return *compute_traits(type); }

std::vector<int64_t> targets_of(QuantType type) {
    // dot_hwy.cpp's targets for the 32-element types; kquants_hwy.cpp, iq_grids_hwy.cpp and q1_0_hwy.cpp
    // have theirs.
    return block_of(type) > 32 ? hwy::SupportedAndGeneratedTargets() : simd_block_targets();
}

}  // namespace

TEST(RowGroups, GroupsKeepEveryRowsBytesAndPadWithZeroRows) {
    Rng rng(5);
    for (QuantType type : kGroupedTypes) {
        for (int64_t blocks : {1, 3, 8}) {
            const int64_t n = blocks * block_of(type);
            const uint64_t row_bytes = quant_row_bytes(type, n);
            for (int rows : {1, 7, 15, 16}) {
                // Random bytes: every bit of the packed Q4_K scales must survive.
                std::vector<uint8_t> plain(row_bytes * rows);
                for (uint8_t& b : plain) b = static_cast<uint8_t>(rng.next_u64());
                std::vector<uint8_t> group(group_bytes(type, n), 0xAB);
                group_rows(type, plain.data(), row_bytes, rows, n, group.data());
                std::vector<uint8_t> row(row_bytes), zero(row_bytes, 0);
                for (int r = 0; r < kGroupRows; ++r) {
                    ungroup_row(type, group.data(), n, r, row.data());
                    if (r < rows) {
                        ASSERT_EQ(std::memcmp(row.data(), plain.data() + r * row_bytes, row_bytes), 0)
                            << quant_type_name(type) << " row " << r;
                    } else {
                        ASSERT_EQ(row, zero) << "padding row " << r;
                    }
                }
            }
        }
    }
    EXPECT_EQ(group_bytes(QuantType::Q4_0, 64), 16u * 2 * 18);
    EXPECT_EQ(group_bytes(QuantType::Q8_0, 64), 16u * 2 * 34);
    EXPECT_EQ(group_bytes(QuantType::Q4_K, 512), 2u * 2368);
    EXPECT_EQ(group_bytes(QuantType::F16, 64), 16u * 2 * 64);
    EXPECT_EQ(group_bytes(QuantType::BF16, 64), 16u * 2 * 64);
    EXPECT_FALSE(has_group_layout(QuantType::F32));
    EXPECT_FALSE(has_group_layout(QuantType::BF16_F32ACT));
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
    for (QuantType type : kGroupedTypes) {
        const QuantType vdt = scalar_traits(type)->vec_dot_type;
        int tested = 0;
        std::string names;
        // AVX2 and NEON twice where the CPU has their int8 dot extension
        // (AVX-VNNI, ARM's dot product): with it and without.
        std::vector<std::pair<int64_t, bool>> runs;
        for (int64_t target : targets_of(type)) {
            if ((target == HWY_AVX2 || target == HWY_NEON) && int8_dot_extension_supported()) {
                runs.emplace_back(target, true);
            }
            runs.emplace_back(target, false);
        }
        // Every target gets the same cases: the inputs, the reference's and
        // the canonical order's outputs are made by the first and kept (the
        // quantizers and the scalar code were most of this test's time,
        // repeated once per target).
        struct Case {
            std::vector<uint8_t> w, x;
            std::vector<int32_t> sums;
            std::vector<float> start, want, canon;  // per (unit, accumulate)
        };
        std::vector<Case> cases;
        for (const auto& [target, with_dot] : runs) {
            hwy::SetSupportedTargetsForTest(target);
            allow_int8_dot_extension(with_dot);
            const QuantTraits& simd = simd_traits(type);
            if (simd.vec_dot_groups == nullptr) continue;
            ++tested;
            names += std::string(" ") + hwy::TargetName(target) + (with_dot ? "+dot" : "");
            const bool first = cases.empty();
            size_t case_index = 0;
            Rng rng(7);
            for (int64_t blocks : {1, 2, 3, 7, 64, 65}) {
                if (is_kquant(type) && blocks > 8) continue;  // 8 super-blocks is 2048 elements
                // Long rows once per kernel family (Q4_0's and Q8_0's stand for the other 32-element types,
                // whose kernels loop over blocks the same way): the sanitizer build runs this too.
                const bool family_leader = type == QuantType::Q4_0 || type == QuantType::Q8_0;
                if (!family_leader && !is_kquant(type) && blocks > 8) continue;
                const int64_t n = blocks * block_of(type);
                for (int n_groups : {1, 3}) {
                    std::vector<uint8_t> w;
                    if (first) w = grouped(type, random_rows(type, n_groups * kGroupRows, n, rng), n_groups * kGroupRows, n);
                    for (int cols : {1, 2, 3, 4, 5, 7, 8, 9, 17}) {
                        // Activations strided and off alignment, with their sums.
                        const size_t x_stride = quant_row_bytes(vdt, n) + 5, x_off = 3;
                        const size_t y_stride = static_cast<size_t>(n_groups * kGroupRows) + 1;
                        const size_t unit_stride = cols * y_stride + 2;
                        if (first) {
                            Case c;
                            c.w = w;
                            c.x.resize(x_off + cols * x_stride);
                            // Q8_0 activations' sums per 32 codes (Q2_0's and NVFP4's blocks hold 64).
                            const int64_t q8_blocks = n / 32;
                            c.sums.resize(static_cast<size_t>(cols * q8_blocks));
                            std::vector<float> v(static_cast<size_t>(n));
                            for (int col = 0; col < cols; ++col) {
                                for (float& f : v) f = rng.next_normal();
                                uint8_t* xc = c.x.data() + x_off + col * x_stride;
                                scalar_traits(vdt)->from_float(v.data(), xc, n);
                                if (vdt != QuantType::Q8_0) continue;
                                for (int64_t b = 0; b < q8_blocks; ++b) {
                                    for (int i = 0; i < 32; ++i) {
                                        c.sums[col * q8_blocks + b] += static_cast<int8_t>(xc[b * 34 + 2 + i]);
                                    }
                                }
                            }
                            cases.push_back(std::move(c));
                        }
                        Case& c = cases[case_index++];
                        // Whole rows, units of one block, and units of 3
                        // blocks (the last one shorter unless 3 divides).
                        // With accumulate, the sums continue from what y held.
                        size_t output = 0;
                        for (int64_t unit_blocks : {blocks, int64_t{1}, int64_t{3}}) {
                            for (bool accumulate : {false, true}) {
                                const int64_t unit_n = unit_blocks * block_of(type);
                                const int64_t n_units = (blocks + unit_blocks - 1) / unit_blocks;
                                const size_t size = n_units * unit_stride, at = output;
                                output += size;
                                if (first) {
                                    std::vector<float> start(size);
                                    for (size_t i = 0; i < size; ++i) start[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
                                    std::vector<float> want = start, canon = start;
                                    vec_dot_groups_reference(type, n, c.w.data(), group_bytes(type, n), n_groups,
                                                             c.x.data() + x_off, x_stride, cols, want.data(), y_stride,
                                                             unit_n, unit_stride, accumulate);
                                    vec_dot_groups_canonical(type, n, c.w.data(), group_bytes(type, n), n_groups,
                                                             c.x.data() + x_off, x_stride, cols, canon.data(), y_stride,
                                                             unit_n, unit_stride, accumulate);
                                    c.start.insert(c.start.end(), start.begin(), start.end());
                                    c.want.insert(c.want.end(), want.begin(), want.end());
                                    c.canon.insert(c.canon.end(), canon.begin(), canon.end());
                                }
                                const float* want = c.want.data() + at;
                                std::vector<float> got(c.start.begin() + at, c.start.begin() + at + size);
                                simd.vec_dot_groups(n, c.w.data(), group_bytes(type, n), n_groups, c.x.data() + x_off,
                                                    x_stride, c.sums.data(), static_cast<size_t>(n / 32), cols,
                                                    got.data(), y_stride, unit_n, unit_stride, accumulate);
                                // Every target gives the canonical bits.
                                ASSERT_EQ(0, std::memcmp(c.canon.data() + at, got.data(), size * sizeof(float)))
                                    << hwy::TargetName(target) << (with_dot ? "+dot " : " ") << quant_type_name(type) << " n " << n
                                    << " groups " << n_groups << " cols " << cols << " unit " << unit_n
                                    << " accumulate " << accumulate;
                                for (size_t i = 0; i < size; ++i) {
                                    const size_t in_unit = i % unit_stride;
                                    const bool padding =
                                        in_unit >= cols * y_stride || in_unit % y_stride == y_stride - 1;
                                    ASSERT_NEAR(got[i], want[i],
                                                padding ? 0.0 : 1e-5 * (std::fabs(want[i]) + n) + 1e-6)
                                        << hwy::TargetName(target) << (with_dot ? "+dot " : " ") << quant_type_name(type) << " n " << n
                                        << " groups " << n_groups << " cols " << cols << " unit " << unit_n
                                        << " accumulate " << accumulate << " at " << i;
                                }
                            }
                        }
                    }
                }
            }
        }
        hwy::SetSupportedTargetsForTest(0);
        allow_int8_dot_extension(true);
        std::fprintf(stderr, "%s: %d target(s) with a grouped kernel:%s\n", quant_type_name(type), tested,
                     names.c_str());
        // Every quant type has one on every target (the exact modes across
        // CPU kinds need it); F16 on the AVX-512 ones, BF16 on AVX-512 BF16
        // (their row kernels give the same bits elsewhere).
        if (is_float(type)) {
            int wide = 0;
            for (const auto& run : runs) {
                wide += type == QuantType::F16 ? run.first == HWY_AVX3 || run.first == HWY_AVX3_DL
                                               : run.first == HWY_AVX3_DL && avx512_bf16_supported();
            }
            EXPECT_EQ(tested, wide) << quant_type_name(type);
        } else {
            EXPECT_EQ(tested, static_cast<int>(runs.size())) << quant_type_name(type);
        }
        // This CPU's best target is tested when it has AVX-512 VNNI.
        if ((hwy::SupportedTargets() & HWY_AVX3_DL) != 0) {
            EXPECT_GT(tested, 0) << quant_type_name(type);
        }
    }
}

TEST(RowGroups, MatmulOverGroupsEqualsRowsAndDoesNotDependOnTheRect) {
    for (QuantType type : kGroupedTypes) {
        if (compute_traits(type)->vec_dot_groups == nullptr) {
            std::fprintf(stderr, "%s: no grouped kernel on this CPU\n", quant_type_name(type));
            continue;
        }
        const QuantType vdt = scalar_traits(type)->vec_dot_type;
        const int64_t unit = block_of(type);
        Rng rng(8);
        const int64_t rows = 75, cols = 5 * unit;  // 4 groups and a padded fifth
        auto plain_bytes = random_rows(type, rows, cols, rng);
        auto grouped_bytes = grouped(type, plain_bytes, rows, cols);
        Matrix plain{type, cols, rows, quant_row_bytes(type, cols), plain_bytes.data()};
        plain.row_begin = 40;  // a slice's rows: groups count from its first row
        Matrix groups = plain;
        groups.data = grouped_bytes.data();
        groups.grouped = true;
        ThreadPool pool(2);
        for (int n_tok : {1, 5, 70}) {
            std::vector<float> xs(static_cast<size_t>(n_tok * cols));
            for (float& v : xs) v = rng.next_normal();
            QuantizedActivation x;
            x.quantize(xs.data(), cols, vdt, n_tok);
            const MatRect whole{40, 115, 0, cols};
            std::vector<float> from_rows(static_cast<size_t>(n_tok * rows)), from_groups(from_rows.size());
            matmul(plain, whole, x, from_rows.data(), rows, pool);
            matmul(groups, whole, x, from_groups.data(), rows, pool);
            for (size_t i = 0; i < from_rows.size(); ++i) {
                ASSERT_NEAR(from_groups[i], from_rows[i], 1e-4 * (1.0 + std::fabs(from_rows[i])))
                    << quant_type_name(type) << " " << n_tok << " " << i;
            }
            // F16's and BF16's row and grouped kernels both follow float_canonical.h's order.
            if (is_float(type)) ASSERT_EQ(from_groups, from_rows) << n_tok;
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
            // Column units (the tensor-parallel partials): columns [2u, 5u)
            // in units of u, over groups as over rows, and over part of the rows.
            QuantizedActivation xc;
            xc.quantize(xs.data() + 2 * unit, 3 * unit, vdt, n_tok, cols);
            std::vector<double> units_rows(static_cast<size_t>(n_tok * rows)), units_groups(units_rows.size());
            matmul_units(plain, {40, 115, 2 * unit, 3 * unit}, xc, unit, units_rows.data(), rows, pool);
            matmul_units(groups, {40, 115, 2 * unit, 3 * unit}, xc, unit, units_groups.data(), rows, pool);
            for (size_t i = 0; i < units_rows.size(); ++i) {
                ASSERT_NEAR(units_groups[i], units_rows[i], 1e-4 * (1.0 + std::fabs(units_rows[i])))
                    << quant_type_name(type) << " " << n_tok << " " << i;
            }
            std::vector<double> units_part(static_cast<size_t>(n_tok * 20));
            matmul_units(groups, {50, 70, 2 * unit, 3 * unit}, xc, unit, units_part.data(), 20, pool);
            for (int t = 0; t < n_tok; ++t) {
                for (int64_t r = 0; r < 20; ++r) {
                    ASSERT_EQ(units_part[t * 20 + r], units_groups[t * rows + 10 + r]) << r;
                }
            }
        }
    }
}

}  // namespace tessera

namespace tessera {

TEST(RowGroups, PanelsAreEqualWholeBlocksWithinTheirBudget) {
    for (QuantType type : kGroupedTypes) {
        for (int64_t blocks : {1, 7, 8, 9, 64, 65, 176, 500}) {
            const int64_t cols = blocks * block_of(type);
            const GroupPanels panels = GroupPanels::for_matrix(type, cols, 5);
            if (is_float(type)) {
                EXPECT_EQ(panels.panel_cols, cols) << blocks;
                EXPECT_EQ(GroupPanels::for_matrix(type, cols, 5, 3 * block_of(type)).panel_cols, cols) << blocks;
                continue;
            }
            EXPECT_EQ(panels.panel_cols % block_of(type), 0);
            int64_t covered = 0;
            for (int64_t p = 0; p < panels.count(); ++p) {
                EXPECT_LE(panels.group_bytes(p), std::max(kPanelBytes, group_bytes(type, block_of(type))));
                EXPECT_GT(panels.width(p), 0);
                covered += panels.width(p);
            }
            EXPECT_EQ(covered, cols);
            // The fewest panels: one fewer, sharing the blocks equally, would not fit.
            if (panels.count() > 1) {
                const int64_t fewer = panels.count() - 1;
                EXPECT_GT(group_bytes(type, (blocks + fewer - 1) / fewer * block_of(type)), kPanelBytes);
            } else {
                EXPECT_EQ(panels.panel_cols, cols);
            }
            EXPECT_EQ(panels.total_bytes(), 5 * group_bytes(type, cols));
        }
    }
    // A 1.1B model's w_down row (5632 Q4_0 columns, 50 KiB a group) in three.
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q4_0, 5632, 128).count(), 3);
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q4_0, 2048, 128).count(), 1);
    // With units (704 channels: 6.2 KiB of Q4_0, 12.0 KiB of Q8_0), panels of
    // as many whole units as fit; rows that fit stay one panel.
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q4_0, 5632, 128, 704).panel_cols, 3 * 704);
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q8_0, 5632, 128, 704).panel_cols, 704);
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q8_0, 2048, 128, 512).panel_cols, 1024);
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q4_0, 2048, 128, 512).panel_cols, 2048);
    // A unit larger than the budget is a panel of its own.
    EXPECT_EQ(GroupPanels::for_matrix(QuantType::Q8_0, 8192, 128, 4096).panel_cols, 4096);
}

// The same product over a matrix in column panels of any width, whatever the
// rows, positions and column units: the bits of one panel. Panel widths that
// cut units (of 3 blocks) included, and panels of whole units (3 blocks: the
// column-split product takes them one panel at a time).
TEST(RowGroups, ProductsOverPanelsEqualOnePanelBitForBit) {
    for (QuantType type : kGroupedTypes) {
        if (compute_traits(type)->vec_dot_groups == nullptr) {
            std::fprintf(stderr, "%s: no grouped kernel on this CPU\n", quant_type_name(type));
            continue;
        }
        const QuantType vdt = scalar_traits(type)->vec_dot_type;
        const int64_t block = block_of(type);
        Rng rng(9);
        const int64_t rows = 75, cols = 11 * block, groups = 5;
        const auto plain = random_rows(type, rows, cols, rng);
        const auto laid_out = [&](int64_t panel_cols) {
            const GroupPanels panels{type, cols, panel_cols, groups};
            auto bytes = std::make_shared<std::vector<uint8_t>>(panels.total_bytes());
            group_matrix(panels, plain.data(), quant_row_bytes(type, cols), rows, bytes->data());
            Matrix m{type, cols, rows, quant_row_bytes(type, cols), bytes->data()};
            m.row_begin = 40;
            m.grouped = true;
            m.panel_cols = panel_cols;
            return std::pair{m, bytes};
        };
        // A grouped F16 matrix is never cut into panels (its lanes start
        // from zero in each): nothing to compare.
        if (is_float(type)) continue;
        const auto [one, one_bytes] = laid_out(cols);
        ThreadPool pool(2);
        for (int n_tok : {1, 5, 70}) {
            std::vector<float> xs(static_cast<size_t>(n_tok * cols));
            for (float& v : xs) v = rng.next_normal();
            QuantizedActivation x, xc;
            x.quantize(xs.data(), cols, vdt, n_tok);
            xc.quantize(xs.data() + 3 * block, 8 * block, vdt, n_tok, cols);
            std::vector<float> want(static_cast<size_t>(n_tok * rows));
            matmul(one, {40, 115, 0, cols}, x, want.data(), rows, pool);
            std::vector<double> want_units(want.size());
            matmul_units(one, {40, 115, 3 * block, 8 * block}, xc, 3 * block, want_units.data(), rows, pool);
            for (int64_t panel_blocks : {1, 2, 3, 4, 5, 6, 10}) {
                const auto [m, bytes] = laid_out(panel_blocks * block);
                std::vector<float> got(want.size());
                matmul(m, {40, 115, 0, cols}, x, got.data(), rows, pool);
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_EQ(got[i], want[i]) << quant_type_name(type) << " panels of " << panel_blocks << " blocks, "
                                               << n_tok << " positions, at " << i;
                }
                // Rows inside groups.
                std::vector<float> part(static_cast<size_t>(n_tok * 18));
                matmul(m, {43, 61, 0, cols}, x, part.data(), 18, pool);
                for (int t = 0; t < n_tok; ++t) {
                    for (int64_t r = 0; r < 18; ++r) ASSERT_EQ(part[t * 18 + r], want[t * rows + 3 + r]) << r;
                }
                // Columns [3, 11) blocks in units of 3 blocks (the last of 2).
                std::vector<double> got_units(want.size());
                matmul_units(m, {40, 115, 3 * block, 8 * block}, xc, 3 * block, got_units.data(), rows, pool);
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_EQ(got_units[i], want_units[i])
                        << quant_type_name(type) << " units, panels of " << panel_blocks << " blocks, at " << i;
                }
            }
        }
    }
}

}  // namespace tessera
