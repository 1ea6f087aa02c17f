#include "ops/row_groups.h"

#include "ops/float_canonical.h"
#include "ops/group_codecs.h"
#include "ops/quant_traits.h"
#include "util/error.h"

#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

const GroupCodec& codec_of(QuantType type) {
    const GroupCodec* codec = group_codec(type);
    if (codec == nullptr) throw make_error("internal: {} has no group layout", quant_type_name(type));
    return *codec;
}

int64_t blocks_of(QuantType type, int64_t n) {
    const GroupCodec& codec = codec_of(type);
    if (n % codec.block_size != 0) {
        throw make_error("internal: {} elements are not whole {} blocks", n, quant_type_name(type));
    }
    return n / codec.block_size;
}

}  // namespace

bool has_group_layout(QuantType type) { return group_codec(type) != nullptr; }

int64_t group_block_size(QuantType type) { return codec_of(type).block_size; }

uint64_t group_bytes(QuantType type, int64_t n) {
    return static_cast<uint64_t>(blocks_of(type, n)) * codec_of(type).group_block_bytes;
}

uint64_t group_col_offset(QuantType type, int64_t col) { return group_bytes(type, col); }

GroupPanels GroupPanels::for_matrix(QuantType type, int64_t cols, int64_t n_groups, int64_t unit_cols) {
    const int64_t nb = blocks_of(type, cols);
    if (nb < 1 || n_groups < 0) throw make_error("internal: panels of {} columns, {} groups", cols, n_groups);
    const GroupCodec& codec = codec_of(type);
    const uint64_t block_bytes = codec.group_block_bytes;
    // A float row's lanes do not resume from a sum (group_codecs.h): one panel.
    if (codec.step == nullptr || static_cast<uint64_t>(nb) * block_bytes <= kPanelBytes) return {type, cols, cols, n_groups};
    if (unit_cols > 0 && unit_cols < cols) {
        const uint64_t unit_bytes = static_cast<uint64_t>(blocks_of(type, unit_cols)) * block_bytes;
        const auto units = static_cast<int64_t>(std::max<uint64_t>(1, kPanelBytes / unit_bytes));
        return {type, cols, std::min(cols, units * unit_cols), n_groups};
    }
    // The fewest panels whose equal share of the blocks, rounded up, fits.
    auto panels = static_cast<int64_t>((static_cast<uint64_t>(nb) * block_bytes + kPanelBytes - 1) / kPanelBytes);
    const auto share = [&] { return (nb + panels - 1) / panels; };
    while (share() > 1 && static_cast<uint64_t>(share()) * block_bytes > kPanelBytes) ++panels;
    return {type, cols, share() * codec.block_size, n_groups};
}

int64_t GroupPanels::width(int64_t p) const { return std::min(panel_cols, cols - p * panel_cols); }

uint64_t GroupPanels::group_bytes(int64_t p) const { return tessera::group_bytes(type, width(p)); }

uint64_t GroupPanels::offset(int64_t p) const {
    return static_cast<uint64_t>(p) * static_cast<uint64_t>(n_groups) * tessera::group_bytes(type, panel_cols);
}

uint64_t GroupPanels::at(int64_t g, int64_t col) const {
    const int64_t p = panel_of(col);
    return offset(p) + static_cast<uint64_t>(g) * group_bytes(p) + group_col_offset(type, col - p * panel_cols);
}

uint64_t GroupPanels::total_bytes() const {
    return static_cast<uint64_t>(n_groups) * tessera::group_bytes(type, cols);
}

void group_rows(QuantType type, const uint8_t* rows, size_t row_stride, int n_rows, int64_t n, uint8_t* out) {
    const GroupCodec& codec = codec_of(type);
    const int64_t nb = blocks_of(type, n);
    const size_t block_bytes = codec.group_block_bytes;
    if (n_rows < 0 || n_rows > kGroupRows) throw make_error("internal: a group of {} rows", n_rows);
    std::memset(out, 0, block_bytes * static_cast<size_t>(nb));
    if (codec.pad_code_byte != 0) {
        // Padding rows hold code 0 (Q8_0's stored + 128) with scale 0.
        for (int64_t b = 0; b < nb; ++b) {
            std::memset(out + b * block_bytes + codec.codes_offset, codec.pad_code_byte, block_bytes - codec.codes_offset);
        }
    }
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = rows + static_cast<size_t>(r) * row_stride;
        for (int64_t b = 0; b < nb; ++b) codec.put(row + b * codec.row_block_bytes, r, out + b * block_bytes);
    }
}

void group_matrix(const GroupPanels& panels, const uint8_t* rows, size_t row_stride, int64_t n_rows, uint8_t* out) {
    if (n_rows < 0 || n_rows > panels.n_groups * kGroupRows || n_rows <= (panels.n_groups - 1) * kGroupRows) {
        throw make_error("internal: {} rows in {} groups", n_rows, panels.n_groups);
    }
    for (int64_t p = 0; p < panels.count(); ++p) {
        const uint64_t col_bytes = quant_row_bytes(panels.type, p * panels.panel_cols);
        for (int64_t g = 0; g < panels.n_groups; ++g) {
            const int64_t r0 = g * kGroupRows;
            group_rows(panels.type, rows + static_cast<uint64_t>(r0) * row_stride + col_bytes, row_stride,
                       static_cast<int>(std::min<int64_t>(kGroupRows, n_rows - r0)), panels.width(p),
                       out + panels.offset(p) + static_cast<uint64_t>(g) * panels.group_bytes(p));
        }
    }
}

void ungroup_row(QuantType type, const uint8_t* group, int64_t n, int r, uint8_t* row) {
    const GroupCodec& codec = codec_of(type);
    const int64_t nb = blocks_of(type, n);
    for (int64_t b = 0; b < nb; ++b) codec.get(group + b * codec.group_block_bytes, r, row + b * codec.row_block_bytes);
}

namespace {

// Each row of each group ungrouped, then y (added to under accumulate) gets
// dot(span, row, column, u0) for each unit of unit_n elements starting at u0
// and each column: the per-row path of the reference and of the float types'
// canonical order.
template <typename Dot>
void dot_ungrouped_rows(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                        size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n, size_t unit_stride,
                        bool accumulate, Dot dot) {
    if (unit_n <= 0 || unit_n > n) unit_n = n;
    std::vector<uint8_t> row(quant_row_bytes(type, n));
    for (int g = 0; g < n_groups; ++g) {
        const auto* group = static_cast<const uint8_t*>(w) + static_cast<size_t>(g) * group_stride;
        for (int r = 0; r < kGroupRows; ++r) {
            ungroup_row(type, group, n, r, row.data());
            for (int64_t u0 = 0, u = 0; u0 < n; u0 += unit_n, ++u) {
                const int64_t span = std::min(unit_n, n - u0);
                for (int c = 0; c < n_cols; ++c) {
                    const uint8_t* xc = static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride;
                    float& out = y[static_cast<size_t>(u) * unit_stride + static_cast<size_t>(c) * y_stride +
                                   static_cast<size_t>(g * kGroupRows + r)];
                    const float d = dot(span, row.data(), xc, u0);
                    out = accumulate ? out + d : d;
                }
            }
        }
    }
}

}  // namespace

void vec_dot_groups_reference(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                              size_t unit_stride, bool accumulate) {
    const QuantTraits& ref = *scalar_traits(type);
    const QuantType vdt = ref.vec_dot_type;
    dot_ungrouped_rows(type, n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride,
                       accumulate, [&](int64_t span, const uint8_t* row, const uint8_t* xc, int64_t u0) {
                           return ref.vec_dot(span, row + quant_row_bytes(type, u0), xc + quant_row_bytes(vdt, u0));
                       });
}

void vec_dot_groups_canonical(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                              size_t unit_stride, bool accumulate) {
    const GroupCodec& codec = codec_of(type);
    if (codec.step == nullptr) {
        // F16, BF16: each unit's dot product in float_canonical.h's order,
        // added to y with accumulate.
        const bool bf16 = type == QuantType::BF16;
        const uint64_t x_bytes = bf16 ? 2 : 4;  // an activation element (BF16's are BF16)
        dot_ungrouped_rows(type, n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride,
                           accumulate, [&](int64_t span, const uint8_t* row, const uint8_t* xc, int64_t u0) {
                               const uint8_t* xu = xc + static_cast<uint64_t>(u0) * x_bytes;
                               if (bf16) return bf16_pairs_dot_canonical(span, row + 2 * u0, xu);
                               // The activations may sit at any byte (the kernels load them unaligned):
                               // copied, so the reference reads aligned floats.
                               std::vector<float> xf(static_cast<size_t>(span));
                               std::memcpy(xf.data(), xu, xf.size() * sizeof(float));
                               return f16_dot_canonical(span, row + 2 * u0, xf.data());
                           });
        return;
    }
    const QuantType vdt = scalar_traits(type)->vec_dot_type;
    // The activation blocks beside one weight block (four Q8_0 ones for Q1_0's 128).
    const uint64_t x_block_bytes = quant_row_bytes(vdt, codec.block_size);
    const int64_t nb = blocks_of(type, n);
    const int64_t unit_nb = (unit_n <= 0 || unit_n > n ? n : unit_n) / codec.block_size;
    for (int g = 0; g < n_groups; ++g) {
        const auto* group = static_cast<const uint8_t*>(w) + static_cast<size_t>(g) * group_stride;
        for (int r = 0; r < kGroupRows; ++r) {
            for (int c = 0; c < n_cols; ++c) {
                const auto* xc = static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride;
                for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
                    float& out = y[static_cast<size_t>(u) * unit_stride + static_cast<size_t>(c) * y_stride +
                                   static_cast<size_t>(g * kGroupRows + r)];
                    float acc = accumulate ? out : 0.0f;
                    for (int64_t b = u0; b < std::min(nb, u0 + unit_nb); ++b) {
                        acc = codec.step(group + static_cast<size_t>(b) * codec.group_block_bytes, r,
                                         xc + static_cast<uint64_t>(b) * x_block_bytes, acc);
                    }
                    out = acc;
                }
            }
        }
    }
}

}  // namespace tessera
