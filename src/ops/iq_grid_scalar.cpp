// Scalar dequantization and dot products of the grid I-quants
// (iq_grid_scalar.h); the quantizers are in iq_grid_quantize.cpp.
#include "ops/iq_grid_scalar.h"

#include "ops/block_io.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grids.h"
#include "util/fp16.h"

#include <cstring>

namespace tessera {

namespace {

constexpr int kBlocks32 = kQK_K / 32;

// Byte k of a little-endian table entry.
template <typename Entry>
int entry_byte(Entry e, int k) {
    return static_cast<int>((e >> (8 * k)) & 0xFF);
}

// sum_i point_i * sign_i * y_i over one group of 8 (IQ2 points, or two IQ3
// points back to back) with its sign byte.
int32_t signed_dot8(const uint8_t* levels, uint8_t signs, const int8_t* y) {
    int32_t s = 0;
    for (int i = 0; i < 8; ++i) s += (signs >> i & 1 ? -1 : 1) * levels[i] * y[i];
    return s;
}

void bytes_of(uint64_t e, uint8_t* out) {
    for (int k = 0; k < 8; ++k) out[k] = static_cast<uint8_t>(entry_byte(e, k));
}

void bytes_of(uint32_t a, uint32_t b, uint8_t* out) {
    for (int k = 0; k < 4; ++k) {
        out[k] = static_cast<uint8_t>(entry_byte(a, k));
        out[4 + k] = static_cast<uint8_t>(entry_byte(b, k));
    }
}

// One group of 8 weights dequantized: db * level * sign, as ggml rounds it.
void dequant8(const uint8_t* levels, uint8_t signs, float db, float* y) {
    for (int i = 0; i < 8; ++i) y[i] = db * static_cast<float>(levels[i]) * (signs >> i & 1 ? -1.0f : 1.0f);
}

// The 8 levels and the sign byte of group l (0..3) of 32-block j.
struct Group8 {
    uint8_t levels[8];
    uint8_t signs;
};

Group8 iq2_xxs_group(const BlockIQ2_XXS& b, int j, int l) {
    uint32_t aux[2];
    std::memcpy(aux, b.qs + 4 * j, sizeof aux);
    Group8 g{};
    bytes_of(iq2_points(QuantType::IQ2_XXS)[(aux[0] >> (8 * l)) & 0xFF], g.levels);
    g.signs = iq_signs_from7(static_cast<int>(aux[1] >> (7 * l)));
    return g;
}
int iq2_xxs_scale(const BlockIQ2_XXS& b, int j) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + 4 * j + 2, sizeof aux);
    return static_cast<int>(aux >> 28);
}

// IQ2_XS and IQ2_S: group l of 32-block j, scale of 16-block h (= 2 j + l / 2).
Group8 iq2_xs_group(const BlockIQ2_XS& b, int j, int l) {
    const uint16_t q = b.qs[4 * j + l];
    Group8 g{};
    bytes_of(iq2_points(QuantType::IQ2_XS)[q & 511], g.levels);
    g.signs = iq_signs_from7(q >> 9);
    return g;
}
Group8 iq2_s_group(const BlockIQ2_S& b, int j, int l) {
    const int index = b.qs[4 * j + l] | ((b.qh[j] << (8 - 2 * l)) & 0x300);
    Group8 g{};
    bytes_of(iq2_points(QuantType::IQ2_S)[index], g.levels);
    g.signs = b.qs[kQK_K / 8 + 4 * j + l];
    return g;
}
int nibble_scale(const uint8_t* scales, int h) { return (scales[h / 2] >> (4 * (h % 2))) & 0xF; }

// IQ3: group l of 32-block j is points 2 l and 2 l + 1 of it.
Group8 iq3_xxs_group(const BlockIQ3_XXS& b, int j, int l) {
    const uint32_t* points = iq3_points(QuantType::IQ3_XXS);
    uint32_t aux;
    std::memcpy(&aux, b.qs + kQK_K / 4 + 4 * j, sizeof aux);
    Group8 g{};
    bytes_of(points[b.qs[8 * j + 2 * l]], points[b.qs[8 * j + 2 * l + 1]], g.levels);
    g.signs = iq_signs_from7(static_cast<int>(aux >> (7 * l)));
    return g;
}
int iq3_xxs_scale(const BlockIQ3_XXS& b, int j) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + kQK_K / 4 + 4 * j, sizeof aux);
    return static_cast<int>(aux >> 28);
}
Group8 iq3_s_group(const BlockIQ3_S& b, int j, int l) {
    const uint32_t* points = iq3_points(QuantType::IQ3_S);
    const int i0 = b.qs[8 * j + 2 * l] | ((b.qh[j] << (8 - 2 * l)) & 256);
    const int i1 = b.qs[8 * j + 2 * l + 1] | ((b.qh[j] << (7 - 2 * l)) & 256);
    Group8 g{};
    bytes_of(points[i0], points[i1], g.levels);
    g.signs = b.signs[4 * j + l];
    return g;
}

// Dequantization and sums of one super-block through a type's accessors:
// Group(b, j, l), and the sub-block factor of group l of 32-block j.
template <typename Block, Group8 (*kGroup)(const Block&, int, int), typename Factor>
void dequant_block(const Block& b, float* y, const Factor& factor) {
    for (int j = 0; j < kBlocks32; ++j) {
        for (int l = 0; l < 4; ++l) {
            const Group8 g = kGroup(b, j, l);
            dequant8(g.levels, g.signs, factor(j, l), y + 32 * j + 8 * l);
        }
    }
}

template <typename Block, Group8 (*kGroup)(const Block&, int, int), typename Scale>
int32_t block_sum(const Block& b, const int8_t* y, const Scale& odd_scale) {
    int32_t s = 0;
    for (int j = 0; j < kBlocks32; ++j) {
        for (int l = 0; l < 4; ++l) {
            const Group8 g = kGroup(b, j, l);
            s += odd_scale(j, l) * signed_dot8(g.levels, g.signs, y + 32 * j + 8 * l);
        }
    }
    return s;
}

template <typename Block, void (*kDequant)(const Block&, float*)>
void to_float_rows(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) kDequant(load_block<Block>(src, b), dst + b * kQK_K);
}

void dequant_iq2_xxs(const BlockIQ2_XXS& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    dequant_block<BlockIQ2_XXS, iq2_xxs_group>(
        b, y, [&](int j, int) { return d * (0.5f + static_cast<float>(iq2_xxs_scale(b, j))) * 0.25f; });
}
void dequant_iq2_xs(const BlockIQ2_XS& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    dequant_block<BlockIQ2_XS, iq2_xs_group>(b, y, [&](int j, int l) {
        return d * (0.5f + static_cast<float>(nibble_scale(b.scales, 2 * j + l / 2))) * 0.25f;
    });
}
void dequant_iq2_s(const BlockIQ2_S& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    dequant_block<BlockIQ2_S, iq2_s_group>(b, y, [&](int j, int l) {
        return d * (0.5f + static_cast<float>(nibble_scale(b.scales, 2 * j + l / 2))) * 0.25f;
    });
}
void dequant_iq3_xxs(const BlockIQ3_XXS& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    dequant_block<BlockIQ3_XXS, iq3_xxs_group>(
        b, y, [&](int j, int) { return d * (0.5f + static_cast<float>(iq3_xxs_scale(b, j))) * 0.5f; });
}
void dequant_iq3_s(const BlockIQ3_S& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    dequant_block<BlockIQ3_S, iq3_s_group>(
        b, y, [&](int j, int) { return d * static_cast<float>(1 + 2 * nibble_scale(b.scales, j)); });
}

}  // namespace

void iq2_xxs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockIQ2_XXS, dequant_iq2_xxs>(src, dst, n); }
void iq2_xs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockIQ2_XS, dequant_iq2_xs>(src, dst, n); }
void iq2_s_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockIQ2_S, dequant_iq2_s>(src, dst, n); }
void iq3_xxs_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockIQ3_XXS, dequant_iq3_xxs>(src, dst, n); }
void iq3_s_to_float(const void* src, float* dst, int64_t n) { to_float_rows<BlockIQ3_S, dequant_iq3_s>(src, dst, n); }

int32_t iq2_xxs_block_sum(const BlockIQ2_XXS& w, const int8_t* y) {
    return block_sum<BlockIQ2_XXS, iq2_xxs_group>(w, y, [&](int j, int) { return 2 * iq2_xxs_scale(w, j) + 1; });
}
int32_t iq2_xs_block_sum(const BlockIQ2_XS& w, const int8_t* y) {
    return block_sum<BlockIQ2_XS, iq2_xs_group>(w, y,
                                                [&](int j, int l) { return 2 * nibble_scale(w.scales, 2 * j + l / 2) + 1; });
}
int32_t iq2_s_block_sum(const BlockIQ2_S& w, const int8_t* y) {
    return block_sum<BlockIQ2_S, iq2_s_group>(w, y,
                                              [&](int j, int l) { return 2 * nibble_scale(w.scales, 2 * j + l / 2) + 1; });
}
int32_t iq3_xxs_block_sum(const BlockIQ3_XXS& w, const int8_t* y) {
    return block_sum<BlockIQ3_XXS, iq3_xxs_group>(w, y, [&](int j, int) { return 2 * iq3_xxs_scale(w, j) + 1; });
}
int32_t iq3_s_block_sum(const BlockIQ3_S& w, const int8_t* y) {
    return block_sum<BlockIQ3_S, iq3_s_group>(w, y, [&](int j, int) { return 2 * nibble_scale(w.scales, j) + 1; });
}

float iq2_xxs_block_step(const BlockIQ2_XXS& w, const BlockQ8_K& x, float acc) {
    return iq_grid_step(x.d, fp16_to_fp32(w.d), 0.125f, iq2_xxs_block_sum(w, x.qs), acc);
}
float iq2_xs_block_step(const BlockIQ2_XS& w, const BlockQ8_K& x, float acc) {
    return iq_grid_step(x.d, fp16_to_fp32(w.d), 0.125f, iq2_xs_block_sum(w, x.qs), acc);
}
float iq2_s_block_step(const BlockIQ2_S& w, const BlockQ8_K& x, float acc) {
    return iq_grid_step(x.d, fp16_to_fp32(w.d), 0.125f, iq2_s_block_sum(w, x.qs), acc);
}
float iq3_xxs_block_step(const BlockIQ3_XXS& w, const BlockQ8_K& x, float acc) {
    return iq_grid_step(x.d, fp16_to_fp32(w.d), 0.25f, iq3_xxs_block_sum(w, x.qs), acc);
}
float iq3_s_block_step(const BlockIQ3_S& w, const BlockQ8_K& x, float acc) {
    return iq_grid_step(x.d, fp16_to_fp32(w.d), 1.0f, iq3_s_block_sum(w, x.qs), acc);
}

float iq2_xxs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_XXS, BlockQ8_K, iq2_xxs_block_step>(n, kQK_K, w, x);
}
float iq2_xs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_XS, BlockQ8_K, iq2_xs_block_step>(n, kQK_K, w, x);
}
float iq2_s_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ2_S, BlockQ8_K, iq2_s_block_step>(n, kQK_K, w, x);
}
float iq3_xxs_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ3_XXS, BlockQ8_K, iq3_xxs_block_step>(n, kQK_K, w, x);
}
float iq3_s_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockIQ3_S, BlockQ8_K, iq3_s_block_step>(n, kQK_K, w, x);
}

}  // namespace tessera
