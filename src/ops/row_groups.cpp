#include "ops/row_groups.h"

#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/error.h"

#include <cstring>
#include <vector>

namespace tessera {

namespace {

constexpr size_t kQ4_0GroupBlock = kGroupRows * sizeof(BlockQ4_0);  // 288
constexpr size_t kQ4_0ScaleBytes = kGroupRows * 2;                  // 32

void require_group_layout(QuantType type) {
    if (!has_group_layout(type)) throw make_error("internal: {} has no group layout", quant_type_name(type));
}

}  // namespace

bool has_group_layout(QuantType type) { return type == QuantType::Q4_0; }

void group_rows(QuantType type, const uint8_t* rows, size_t row_stride, int n_rows, int64_t n, uint8_t* out) {
    require_group_layout(type);
    if (n_rows < 0 || n_rows > kGroupRows || n % kQ4_0Block != 0) {
        throw make_error("internal: a group of {} rows of {} elements", n_rows, n);
    }
    const int64_t nb = n / kQ4_0Block;
    std::memset(out, 0, kQ4_0GroupBlock * static_cast<size_t>(nb));
    for (int r = 0; r < n_rows; ++r) {
        const auto* blocks = reinterpret_cast<const BlockQ4_0*>(rows + static_cast<size_t>(r) * row_stride);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* g = out + static_cast<size_t>(b) * kQ4_0GroupBlock;
            std::memcpy(g + 2 * r, &blocks[b].d, 2);
            for (int k = 0; k < 4; ++k) std::memcpy(g + kQ4_0ScaleBytes + 64 * k + 4 * r, blocks[b].qs + 4 * k, 4);
        }
    }
}

void ungroup_row(QuantType type, const uint8_t* group, int64_t n, int r, uint8_t* row) {
    require_group_layout(type);
    auto* blocks = reinterpret_cast<BlockQ4_0*>(row);
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const uint8_t* g = group + static_cast<size_t>(b) * kQ4_0GroupBlock;
        std::memcpy(&blocks[b].d, g + 2 * r, 2);
        for (int k = 0; k < 4; ++k) std::memcpy(blocks[b].qs + 4 * k, g + kQ4_0ScaleBytes + 64 * k + 4 * r, 4);
    }
}

void vec_dot_groups_reference(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride) {
    const QuantTraits& ref = *scalar_traits(type);
    std::vector<uint8_t> row(quant_row_bytes(type, n));
    for (int g = 0; g < n_groups; ++g) {
        const auto* group = static_cast<const uint8_t*>(w) + static_cast<size_t>(g) * group_stride;
        for (int r = 0; r < kGroupRows; ++r) {
            ungroup_row(type, group, n, r, row.data());
            for (int c = 0; c < n_cols; ++c) {
                y[static_cast<size_t>(c) * y_stride + static_cast<size_t>(g * kGroupRows + r)] =
                    ref.vec_dot(n, row.data(), static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride);
            }
        }
    }
}

}  // namespace tessera
