// Scalar reference of the ternary types (ternary_scalar.h).
#include "ops/ternary_scalar.h"

#include "ops/block_io.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

// The block's largest magnitude (its scale, stored as fp16) and the inverse
// the codes are rounded with, unrounded as llama.cpp uses it.
struct TernaryScale {
    float d, id;
};
TernaryScale ternary_scale(const float* x) {
    float amax = 0.0f;
    for (int i = 0; i < kQK_K; ++i) amax = std::max(amax, std::fabs(x[i]));
    return {amax, amax != 0.0f ? 1.0f / amax : 0.0f};
}

// x / d rounded half away from zero, + 1 (llama.cpp's lroundf).
int ternary_code(float x, float id) { return static_cast<int>(std::lround(x * id)) + 1; }

// Trits (the first most significant) packed as llama.cpp does: the base-3
// number scaled into a byte, rounded up, so trit l comes back as
// (uint8_t(b * 3^l) * 3) >> 8.
uint8_t pack_trits(const int* trits, int count) {
    int q = 0;
    for (int t = 0; t < count; ++t) q = q * 3 + trits[t];
    for (int t = count; t < 5; ++t) q *= 3;
    return static_cast<uint8_t>((static_cast<uint16_t>(q) * 256 + 242) / 243);
}

template <class Block, int (*kCode)(const Block&, int)>
float ternary_step(const Block& w, const BlockQ8_K& x, float acc) {
    int32_t s = 0;
    for (int i = 0; i < kQK_K; ++i) s += (kCode(w, i) - 1) * int32_t{x.qs[i]};
    return std::fma(static_cast<float>(s), fp16_to_fp32(w.d) * x.d, acc);
}

template <class Block, int (*kCode)(const Block&, int)>
void ternary_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const auto block = load_block<Block>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQK_K; ++i) dst[b * kQK_K + i] = static_cast<float>(kCode(block, i) - 1) * d;
    }
}

// Each block's scale, then its codes packed by kPack(x, id, block).
template <class Block, void (*kPack)(const float*, float, Block&)>
void ternary_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        const TernaryScale s = ternary_scale(x);
        Block block{};
        block.d = fp32_to_fp16(s.d);
        kPack(x, s.id, block);
        store_block(dst, b, block);
    }
}

void pack_tq2_0(const float* x, float id, BlockTQ2_0& block) {
    for (int i = 0; i < kQK_K; ++i) {
        const int byte = 32 * (i / 128) + i % 32;
        block.qs[byte] = static_cast<uint8_t>(block.qs[byte] | ((ternary_code(x[i], id) & 3) << (2 * ((i / 32) % 4))));
    }
}

// qs[m], m < 32: elements m + 32 t; qs[32 + m], m < 16: 160 + m + 16 t;
// qh[j]: 240 + j + 4 t.
void pack_tq1_0(const float* x, float id, BlockTQ1_0& block) {
    int trits[5];
    for (int m = 0; m < 32; ++m) {
        for (int t = 0; t < 5; ++t) trits[t] = ternary_code(x[m + 32 * t], id);
        block.qs[m] = pack_trits(trits, 5);
    }
    for (int m = 0; m < 16; ++m) {
        for (int t = 0; t < 5; ++t) trits[t] = ternary_code(x[160 + m + 16 * t], id);
        block.qs[32 + m] = pack_trits(trits, 5);
    }
    for (int j = 0; j < 4; ++j) {
        for (int t = 0; t < 4; ++t) trits[t] = ternary_code(x[240 + j + 4 * t], id);
        block.qh[j] = pack_trits(trits, 4);
    }
}

}  // namespace

void tq2_0_to_float(const void* src, float* dst, int64_t n) { ternary_to_float<BlockTQ2_0, tq2_0_code>(src, dst, n); }

void tq2_0_from_float(const float* src, void* dst, int64_t n) {
    ternary_from_float<BlockTQ2_0, pack_tq2_0>(src, dst, n);
}

float tq2_0_block_step(const BlockTQ2_0& w, const BlockQ8_K& x, float acc) {
    return ternary_step<BlockTQ2_0, tq2_0_code>(w, x, acc);
}

float tq2_0_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockTQ2_0, BlockQ8_K, tq2_0_block_step>(n, kQK_K, w, x);
}

void tq1_0_to_float(const void* src, float* dst, int64_t n) { ternary_to_float<BlockTQ1_0, tq1_0_code>(src, dst, n); }

void tq1_0_from_float(const float* src, void* dst, int64_t n) {
    ternary_from_float<BlockTQ1_0, pack_tq1_0>(src, dst, n);
}

float tq1_0_block_step(const BlockTQ1_0& w, const BlockQ8_K& x, float acc) {
    return ternary_step<BlockTQ1_0, tq1_0_code>(w, x, acc);
}

float tq1_0_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockTQ1_0, BlockQ8_K, tq1_0_block_step>(n, kQK_K, w, x);
}

}  // namespace tessera
