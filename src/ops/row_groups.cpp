#include "ops/row_groups.h"

#include "ops/kquant_blocks.h"
#include "ops/kquant_group_layout.h"
#include "ops/iq4_scalar.h"
#include "ops/kquant_scalar.h"
#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/error.h"

#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

// Byte offsets within one block (Q4_0) or super-block (Q4_K) of a group.
constexpr size_t kQ4_0GroupBlock = kGroupRows * sizeof(BlockQ4_0);  // 288
constexpr size_t kQ4_0Qs = kGroupRows * 2;                          // 32
constexpr size_t kQ8_0GroupBlock = kGroupRows * sizeof(BlockQ8_0);  // 544
constexpr size_t kQ8_0Qs = kGroupRows * 2;                          // 32
constexpr size_t kQ4_KDmin = 32, kQ4_KScales = 64, kQ4_KMins = 192, kQ4_KQs = 320;
constexpr size_t kQ4_KGroupBlock = kQ4_KQs + kGroupRows * kQK_K / 2;  // 2368

struct GroupShape {
    int block_size;      // elements per block
    size_t block_bytes;  // bytes per block of 16 rows
};

GroupShape shape_of(QuantType type) {
    switch (type) {
        case QuantType::Q4_0: return {kQ4_0Block, kQ4_0GroupBlock};
        case QuantType::Q8_0: return {kQ8_0Block, kQ8_0GroupBlock};
        case QuantType::Q4_K: return {kQK_K, kQ4_KGroupBlock};
        case QuantType::Q6_K: return {kQK_K, static_cast<size_t>(q6k_group::kBlockBytes)};
        case QuantType::Q5_K: return {kQK_K, static_cast<size_t>(q5k_group::kBlockBytes)};
        case QuantType::IQ4_XS: return {kQK_K, static_cast<size_t>(iq4xs_group::kBlockBytes)};
        default: throw make_error("internal: {} has no group layout", quant_type_name(type));
    }
}

int64_t blocks_of(QuantType type, int64_t n) {
    const GroupShape shape = shape_of(type);
    if (n % shape.block_size != 0) {
        throw make_error("internal: {} elements are not whole {} blocks", n, quant_type_name(type));
    }
    return n / shape.block_size;
}

void put_q4_0(const BlockQ4_0& block, int r, uint8_t* g) {
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(g + kQ4_0Qs + 64 * k + 4 * r, block.qs + 4 * k, 4);
}

void get_q4_0(const uint8_t* g, int r, BlockQ4_0& block) {
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(block.qs + 4 * k, g + kQ4_0Qs + 64 * k + 4 * r, 4);
}

// Q8_0 codes are stored + 128 (XOR 0x80), as unsigned bytes for dpbusd.
void put_q8_0(const BlockQ8_0& block, int r, uint8_t* g) {
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int k = 0; k < 8; ++k) {
        for (int i = 0; i < 4; ++i) {
            g[kQ8_0Qs + 64 * k + 4 * r + i] = static_cast<uint8_t>(static_cast<uint8_t>(block.qs[4 * k + i]) ^ 0x80);
        }
    }
}

void get_q8_0(const uint8_t* g, int r, BlockQ8_0& block) {
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int k = 0; k < 8; ++k) {
        for (int i = 0; i < 4; ++i) block.qs[4 * k + i] = static_cast<int8_t>(g[kQ8_0Qs + 64 * k + 4 * r + i] ^ 0x80);
    }
}

void put_q4_k(const BlockQ4_K& block, int r, uint8_t* g) {
    std::memcpy(g + 2 * r, &block.d, 2);
    std::memcpy(g + kQ4_KDmin + 2 * r, &block.dmin, 2);
    for (int j = 0; j < 8; ++j) q4_k_scale_min(j, block.scales, g + kQ4_KScales + 16 * j + r, g + kQ4_KMins + 16 * j + r);
    for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 8; ++k) std::memcpy(g + kQ4_KQs + 512 * j + 64 * k + 4 * r, block.qs + 32 * j + 4 * k, 4);
    }
}

// The inverse of q4_k_scale_min's unpacking: 6-bit scales and mins back into
// llama.cpp's 12 bytes.
void pack_q4_k_scales(const uint8_t* sc, const uint8_t* m, uint8_t* scales) {
    for (int j = 0; j < 4; ++j) {
        scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void get_q4_k(const uint8_t* g, int r, BlockQ4_K& block) {
    std::memcpy(&block.d, g + 2 * r, 2);
    std::memcpy(&block.dmin, g + kQ4_KDmin + 2 * r, 2);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = g[kQ4_KScales + 16 * j + r];
        m[j] = g[kQ4_KMins + 16 * j + r];
    }
    pack_q4_k_scales(sc, m, block.scales);
    for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 8; ++k) std::memcpy(block.qs + 32 * j + 4 * k, g + kQ4_KQs + 512 * j + 64 * k + 4 * r, 4);
    }
}

// Where element e's low nibble (in byte *shift's nibble) and its top two
// bits (at bit *high_shift of the byte at *high) sit in a Q6_K group block,
// for row r.
void q6_k_slots(int e, int r, size_t* low, int* shift, size_t* high, int* high_shift) {
    using namespace q6k_group;
    const int h = e / 64, t = e % 64;
    const int upper = t >= 32 ? 1 : 0;
    const int k = (t % 32) / 4, i = t % 4;
    *low = static_cast<size_t>(kQs + kChunkBytes * h + 64 * k + 4 * r + i);
    *shift = 4 * upper;
    *high = static_cast<size_t>(kQs + kChunkBytes * h + kHighs + 64 * (k / 2) + 4 * r + i);
    *high_shift = 4 * (k % 2) + 2 * upper;
}

void put_q6_k(const BlockQ6_K& block, int r, uint8_t* g) {
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int j = 0; j < 16; ++j) g[q6k_group::kScales + 16 * j + r] = static_cast<uint8_t>(block.scales[j]);
    for (int e = 0; e < kQK_K; ++e) {
        size_t low, high;
        int shift, high_shift;
        q6_k_slots(e, r, &low, &shift, &high, &high_shift);
        const int code = q6_k_code(block, e);
        g[low] = static_cast<uint8_t>(g[low] | ((code & 0xF) << shift));
        g[high] = static_cast<uint8_t>(g[high] | ((code >> 4) << high_shift));
    }
}

void get_q6_k(const uint8_t* g, int r, BlockQ6_K& block) {
    block = BlockQ6_K{};
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int j = 0; j < 16; ++j) block.scales[j] = static_cast<int8_t>(g[q6k_group::kScales + 16 * j + r]);
    for (int e = 0; e < kQK_K; ++e) {
        size_t low, high;
        int shift, high_shift;
        q6_k_slots(e, r, &low, &shift, &high, &high_shift);
        q6_k_set_code(block, e, ((g[low] >> shift) & 0xF) | (((g[high] >> high_shift) & 3) << 4));
    }
}

void put_q5_k(const BlockQ5_K& block, int r, uint8_t* g) {
    using namespace q5k_group;
    std::memcpy(g + 2 * r, &block.d, 2);
    std::memcpy(g + kDmin + 2 * r, &block.dmin, 2);
    for (int j = 0; j < 8; ++j) q4_k_scale_min(j, block.scales, g + kScales + 16 * j + r, g + kMins + 16 * j + r);
    for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 64, upper = (e % 64) / 32, k = (e % 32) / 4, i = e % 4;
        const int code = q5_k_code(block, e);
        uint8_t* chunk = g + kQs + kChunkBytes * h;
        chunk[64 * k + 4 * r + i] |= static_cast<uint8_t>((code & 0xF) << (4 * upper));
        chunk[kHighs + 64 * (k / 4) + 4 * r + i] |= static_cast<uint8_t>((code >> 4) << (2 * (k % 4) + upper));
    }
}

void get_q5_k(const uint8_t* g, int r, BlockQ5_K& block) {
    using namespace q5k_group;
    block = BlockQ5_K{};
    std::memcpy(&block.d, g + 2 * r, 2);
    std::memcpy(&block.dmin, g + kDmin + 2 * r, 2);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = g[kScales + 16 * j + r];
        m[j] = g[kMins + 16 * j + r];
    }
    pack_q4_k_scales(sc, m, block.scales);
    for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 64, upper = (e % 64) / 32, k = (e % 32) / 4, i = e % 4;
        const uint8_t* chunk = g + kQs + kChunkBytes * h;
        const int low = (chunk[64 * k + 4 * r + i] >> (4 * upper)) & 0xF;
        const int high = (chunk[kHighs + 64 * (k / 4) + 4 * r + i] >> (2 * (k % 4) + upper)) & 1;
        q5_k_set_code(block, e, low | (high << 4));
    }
}

// IQ4_XS: the 6-bit sub-block scales one byte each, the indices in Q4_K's
// chunk order (sub-block j's 16 bytes hold elements 32j + l (low nibble) and
// 32j + 16 + l (high): remapped to Q4_K's low = element 64h + l, high =
// 64h + 32 + l).
int iq4_xs_index(const BlockIQ4_XS& block, int e) {
    const int j = e / 32, l = e % 32;
    return l < 16 ? block.qs[16 * j + l] & 0xF : block.qs[16 * j + l - 16] >> 4;
}

void put_iq4_xs(const BlockIQ4_XS& block, int r, uint8_t* g) {
    using namespace iq4xs_group;
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int j = 0; j < 8; ++j) {
        g[kScales + 16 * j + r] = static_cast<uint8_t>(iq4_xs_scale(j, block.scales_l[j / 2], block.scales_h));
    }
    for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 64, upper = (e % 64) / 32, k = (e % 32) / 4, i = e % 4;
        g[kQs + 512 * h + 64 * k + 4 * r + i] |= static_cast<uint8_t>(iq4_xs_index(block, e) << (4 * upper));
    }
}

void get_iq4_xs(const uint8_t* g, int r, BlockIQ4_XS& block) {
    using namespace iq4xs_group;
    block = BlockIQ4_XS{};
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int j = 0; j < 8; ++j) {
        const int ls = g[kScales + 16 * j + r];
        block.scales_l[j / 2] = static_cast<uint8_t>(block.scales_l[j / 2] | ((ls & 0xF) << (4 * (j % 2))));
        block.scales_h = static_cast<uint16_t>(block.scales_h | ((ls >> 4) << (2 * j)));
    }
    for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 64, upper = (e % 64) / 32, k = (e % 32) / 4, i = e % 4;
        const int index = (g[kQs + 512 * h + 64 * k + 4 * r + i] >> (4 * upper)) & 0xF;
        const int j = e / 32, l = e % 32;
        if (l < 16) {
            block.qs[16 * j + l] = static_cast<uint8_t>(block.qs[16 * j + l] | index);
        } else {
            block.qs[16 * j + l - 16] = static_cast<uint8_t>(block.qs[16 * j + l - 16] | (index << 4));
        }
    }
}

}  // namespace

bool has_group_layout(QuantType type) {
    return type == QuantType::Q4_0 || type == QuantType::Q8_0 || type == QuantType::Q4_K || type == QuantType::Q6_K ||
           type == QuantType::Q5_K || type == QuantType::IQ4_XS;
}

uint64_t group_bytes(QuantType type, int64_t n) {
    return static_cast<uint64_t>(blocks_of(type, n)) * shape_of(type).block_bytes;
}

uint64_t group_col_offset(QuantType type, int64_t col) { return group_bytes(type, col); }

GroupPanels GroupPanels::for_matrix(QuantType type, int64_t cols, int64_t n_groups, int64_t unit_cols) {
    const int64_t nb = blocks_of(type, cols);
    if (nb < 1 || n_groups < 0) throw make_error("internal: panels of {} columns, {} groups", cols, n_groups);
    const GroupShape shape = shape_of(type);
    if (static_cast<uint64_t>(nb) * shape.block_bytes <= kPanelBytes) return {type, cols, cols, n_groups};
    if (unit_cols > 0 && unit_cols < cols) {
        const uint64_t unit_bytes = static_cast<uint64_t>(blocks_of(type, unit_cols)) * shape.block_bytes;
        const auto units = static_cast<int64_t>(std::max<uint64_t>(1, kPanelBytes / unit_bytes));
        return {type, cols, std::min(cols, units * unit_cols), n_groups};
    }
    // The fewest panels whose equal share of the blocks, rounded up, fits.
    auto panels = static_cast<int64_t>((static_cast<uint64_t>(nb) * shape.block_bytes + kPanelBytes - 1) / kPanelBytes);
    const auto share = [&] { return (nb + panels - 1) / panels; };
    while (share() > 1 && static_cast<uint64_t>(share()) * shape.block_bytes > kPanelBytes) ++panels;
    return {type, cols, share() * shape.block_size, n_groups};
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
    const int64_t nb = blocks_of(type, n);
    const size_t block_bytes = shape_of(type).block_bytes;
    if (n_rows < 0 || n_rows > kGroupRows) throw make_error("internal: a group of {} rows", n_rows);
    std::memset(out, 0, block_bytes * static_cast<size_t>(nb));
    if (type == QuantType::Q8_0) {
        // Padding rows hold code 0 (stored + 128) with scale 0.
        for (int64_t b = 0; b < nb; ++b) std::memset(out + b * block_bytes + kQ8_0Qs, 0x80, block_bytes - kQ8_0Qs);
    }
    for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = rows + static_cast<size_t>(r) * row_stride;
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* g = out + static_cast<size_t>(b) * block_bytes;
            if (type == QuantType::Q4_0) {
                BlockQ4_0 block;
                std::memcpy(&block, row + b * sizeof(BlockQ4_0), sizeof(block));
                put_q4_0(block, r, g);
            } else if (type == QuantType::Q8_0) {
                BlockQ8_0 block;
                std::memcpy(&block, row + b * sizeof(BlockQ8_0), sizeof(block));
                put_q8_0(block, r, g);
            } else if (type == QuantType::Q4_K) {
                BlockQ4_K block;
                std::memcpy(&block, row + b * sizeof(BlockQ4_K), sizeof(block));
                put_q4_k(block, r, g);
            } else if (type == QuantType::Q5_K) {
                BlockQ5_K block;
                std::memcpy(&block, row + b * sizeof(BlockQ5_K), sizeof(block));
                put_q5_k(block, r, g);
            } else if (type == QuantType::IQ4_XS) {
                BlockIQ4_XS block;
                std::memcpy(&block, row + b * sizeof(BlockIQ4_XS), sizeof(block));
                put_iq4_xs(block, r, g);
            } else {
                BlockQ6_K block;
                std::memcpy(&block, row + b * sizeof(BlockQ6_K), sizeof(block));
                put_q6_k(block, r, g);
            }
        }
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
    const int64_t nb = blocks_of(type, n);
    const size_t block_bytes = shape_of(type).block_bytes;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* g = group + static_cast<size_t>(b) * block_bytes;
        if (type == QuantType::Q4_0) {
            BlockQ4_0 block;
            get_q4_0(g, r, block);
            std::memcpy(row + b * sizeof(BlockQ4_0), &block, sizeof(block));
        } else if (type == QuantType::Q8_0) {
            BlockQ8_0 block;
            get_q8_0(g, r, block);
            std::memcpy(row + b * sizeof(BlockQ8_0), &block, sizeof(block));
        } else if (type == QuantType::Q4_K) {
            BlockQ4_K block;
            get_q4_k(g, r, block);
            std::memcpy(row + b * sizeof(BlockQ4_K), &block, sizeof(block));
        } else if (type == QuantType::Q5_K) {
            BlockQ5_K block;
            get_q5_k(g, r, block);
            std::memcpy(row + b * sizeof(BlockQ5_K), &block, sizeof(block));
        } else if (type == QuantType::IQ4_XS) {
            BlockIQ4_XS block;
            get_iq4_xs(g, r, block);
            std::memcpy(row + b * sizeof(BlockIQ4_XS), &block, sizeof(block));
        } else {
            BlockQ6_K block;
            get_q6_k(g, r, block);
            std::memcpy(row + b * sizeof(BlockQ6_K), &block, sizeof(block));
        }
    }
}

void vec_dot_groups_reference(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                              size_t unit_stride, bool accumulate) {
    const QuantTraits& ref = *scalar_traits(type);
    const QuantType vdt = ref.vec_dot_type;
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
                    const float dot =
                        ref.vec_dot(span, row.data() + quant_row_bytes(type, u0), xc + quant_row_bytes(vdt, u0));
                    out = accumulate ? out + dot : dot;
                }
            }
        }
    }
}

namespace {

// Row r's sum over one Q4_K super-block of a group against a Q8_K block, in
// the canonical order: the integers sum_j sc_j (q . y)_j and sum_j m_j sum(y)_j
// (exact), then block = fma(-dmin, float(mins), d * float(scaled)) and one
// fused step with the activations' scale.
float q4_k_canonical_step(const uint8_t* gb, int r, const BlockQ8_K& xb, float acc) {
    BlockQ4_K wb;
    get_q4_k(gb, r, wb);
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        q4_k_scale_min(j, wb.scales, &sc, &m);
        const uint8_t* q = wb.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += ((q[i] >> shift) & 15) * xb.qs[32 * j + i];
        scaled += sc * s;
        mins += m * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
    }
    const float block = std::fma(-fp16_to_fp32(wb.dmin), static_cast<float>(mins),
                                 fp16_to_fp32(wb.d) * static_cast<float>(scaled));
    return std::fma(xb.d, block, acc);
}

// Row r's sum over one Q4_0 or Q8_0 block of a group: the exact integer sum,
// the scales' product rounded to float, then one fused step.
float int8_canonical_step(QuantType type, const uint8_t* gb, int r, const BlockQ8_0& xb, float acc) {
    int32_t s = 0;
    uint16_t dw;
    if (type == QuantType::Q4_0) {
        BlockQ4_0 wb;
        get_q4_0(gb, r, wb);
        dw = wb.d;
        for (int i = 0; i < 16; ++i) s += ((wb.qs[i] & 15) - 8) * xb.qs[i] + ((wb.qs[i] >> 4) - 8) * xb.qs[i + 16];
    } else {
        BlockQ8_0 wb;
        get_q8_0(gb, r, wb);
        dw = wb.d;
        for (int i = 0; i < 32; ++i) s += wb.qs[i] * xb.qs[i];
    }
    const float scale = fp16_to_fp32(dw) * fp16_to_fp32(xb.d);
    return std::fma(static_cast<float>(s), scale, acc);
}

}  // namespace

void vec_dot_groups_canonical(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                              size_t unit_stride, bool accumulate) {
    const GroupShape shape = shape_of(type);
    const int64_t nb = blocks_of(type, n);
    const int64_t unit_nb = (unit_n <= 0 || unit_n > n ? n : unit_n) / shape.block_size;
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
                        const uint8_t* gb = group + static_cast<size_t>(b) * shape.block_bytes;
                        if (type == QuantType::IQ4_XS) {
                            BlockQ8_K xb;
                            std::memcpy(&xb, xc + b * sizeof(BlockQ8_K), sizeof(xb));
                            BlockIQ4_XS wb;
                            get_iq4_xs(gb, r, wb);
                            acc = iq4_xs_block_step(wb, xb, acc);
                        } else if (type == QuantType::Q5_K) {
                            BlockQ8_K xb;
                            std::memcpy(&xb, xc + b * sizeof(BlockQ8_K), sizeof(xb));
                            BlockQ5_K wb;
                            get_q5_k(gb, r, wb);
                            acc = q5_k_block_step(wb, xb, acc);
                        } else if (type == QuantType::Q6_K) {
                            BlockQ8_K xb;
                            std::memcpy(&xb, xc + b * sizeof(BlockQ8_K), sizeof(xb));
                            BlockQ6_K wb;
                            get_q6_k(gb, r, wb);
                            acc = q6_k_block_step(wb, xb, acc);
                        } else if (type == QuantType::Q4_K) {
                            BlockQ8_K xb;
                            std::memcpy(&xb, xc + b * sizeof(BlockQ8_K), sizeof(xb));
                            acc = q4_k_canonical_step(gb, r, xb, acc);
                        } else {
                            BlockQ8_0 xb;
                            std::memcpy(&xb, xc + b * sizeof(BlockQ8_0), sizeof(xb));
                            acc = int8_canonical_step(type, gb, r, xb, acc);
                        }
                    }
                    out = acc;
                }
            }
        }
    }
}

}  // namespace tessera
