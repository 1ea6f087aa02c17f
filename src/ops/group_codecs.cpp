#include "ops/group_codecs.h"

#include "ops/block32_group_layout.h"
#include "ops/block32_scalar.h"
#include "ops/iq4_scalar.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grid_scalar.h"
#include "ops/kquant_blocks.h"
#include "ops/kquant_group_layout.h"
#include "ops/kquant_scalar.h"
#include "ops/nvfp4_group_layout.h"
#include "ops/nvfp4_scalar.h"
#include "ops/q1_0_group_layout.h"
#include "ops/q1_0_scalar.h"
#include "ops/q2_0_scalar.h"
#include "ops/ternary_group_layout.h"
#include "ops/ternary_scalar.h"
#include "ops/quant_blocks.h"
#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// Byte offsets within one block (Q4_0, Q8_0) or super-block (Q4_K) of a group.
constexpr size_t kQ4_0Qs = 2 * kGroupRows;  // after the 16 rows' fp16 scales
constexpr size_t kQ8_0Qs = 2 * kGroupRows;
constexpr size_t kQ4_KDmin = 32, kQ4_KScales = 64, kQ4_KMins = 192, kQ4_KQs = 320;

// Q4_0, Q1_0 and Q2_0 (q1_0_group_layout.h), whose blocks are the same
// fields: an fp16 scale and 16 bytes of codes (nibbles, signs or 2-bit codes)
// in four words.
template <typename Block>
void put_q4_0(const Block& block, int r, uint8_t* g) {
    static_assert(sizeof(block.qs) == 16 && kQ4_0Qs == q1_0_group::kQs);
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(g + kQ4_0Qs + 64 * k + 4 * r, block.qs + 4 * k, 4);
}

template <typename Block>
void get_q4_0(const uint8_t* g, int r, Block& block) {
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(block.qs + 4 * k, g + kQ4_0Qs + 64 * k + 4 * r, 4);
}

// TQ2_0 and TQ1_0 (ternary_group_layout.h): the scale (after the code bytes
// in GGUF) and the code bytes as kWords words.
template <typename Block, int64_t kWords>
void put_ternary(const Block& block, int r, uint8_t* g) {
    static_assert(sizeof(Block) == 4 * kWords + 2);
    std::memcpy(g + 2 * r, &block.d, 2);
    const auto* codes = reinterpret_cast<const uint8_t*>(&block);
    for (int k = 0; k < kWords; ++k) std::memcpy(g + ternary_group::kWords + 64 * k + 4 * r, codes + 4 * k, 4);
}

template <typename Block, int64_t kWords>
void get_ternary(const uint8_t* g, int r, Block& block) {
    std::memcpy(&block.d, g + 2 * r, 2);
    auto* codes = reinterpret_cast<uint8_t*>(&block);
    for (int k = 0; k < kWords; ++k) std::memcpy(codes + 4 * k, g + ternary_group::kWords + 64 * k + 4 * r, 4);
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


// --- the 32-element types beyond Q4_0 / Q8_0 (block32_group_layout.h) ---

// Element e's code bits of a Q4_0-ordered group block: its nibble in the
// byte at *low (nibble *shift), its fifth bit at bit *high_bit of byte 4r + i
// of the high-bit vector.
void block32_slots(const block32_group::Layout& L, int e, int r, size_t* low, int* shift, size_t* high, int* high_bit) {
    const int upper = e / 16, k = (e % 16) / 4, i = e % 4;
    *low = static_cast<size_t>(L.qs + 64 * k + 4 * r + i);
    *shift = 4 * upper;
    *high = static_cast<size_t>(L.highs + 4 * r + i);
    *high_bit = 2 * k + upper;
}

// Index e (0..31) of a Q4_0-ordered 16 bytes, and its setter.
int nibble_of(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }
void set_nibble(uint8_t* qs, int e, int v) { qs[e % 16] = static_cast<uint8_t>(qs[e % 16] | (v << (4 * (e / 16)))); }

template <QuantType kType>
constexpr const block32_group::Layout& layout32() {
    using namespace block32_group;
    if constexpr (kType == QuantType::Q5_0) return kQ5_0;
    else if constexpr (kType == QuantType::Q5_1) return kQ5_1;
    else if constexpr (kType == QuantType::Q4_1) return kQ4_1;
    else if constexpr (kType == QuantType::IQ4_NL) return kIQ4_NL;
    else return kMXFP4;
}

// Q5_0 / Q5_1 / Q4_1: the scale (and min) and the 5-bit (4-bit) codes.
template <QuantType kType, typename Block>
void put_q5(const uint8_t* bytes, int r, uint8_t* g) {
    constexpr const block32_group::Layout& L = layout32<kType>();
    Block block;
    std::memcpy(&block, bytes, sizeof block);
    std::memcpy(g + 2 * r, &block.d, 2);
    if constexpr (L.m != 0) std::memcpy(g + L.m + 2 * r, &block.m, 2);
    uint32_t qh = 0;
    if constexpr (L.highs != 0) std::memcpy(&qh, block.qh, 4);
    for (int e = 0; e < 32; ++e) {
        size_t low, high;
        int shift, high_bit;
        block32_slots(L, e, r, &low, &shift, &high, &high_bit);
        g[low] = static_cast<uint8_t>(g[low] | (nibble_of(block.qs, e) << shift));
        if constexpr (L.highs != 0) g[high] = static_cast<uint8_t>(g[high] | (((qh >> e) & 1) << high_bit));
    }
}

template <QuantType kType, typename Block>
void get_q5(const uint8_t* g, int r, uint8_t* bytes) {
    constexpr const block32_group::Layout& L = layout32<kType>();
    Block block{};
    std::memcpy(&block.d, g + 2 * r, 2);
    if constexpr (L.m != 0) std::memcpy(&block.m, g + L.m + 2 * r, 2);
    uint32_t qh = 0;
    for (int e = 0; e < 32; ++e) {
        size_t low, high;
        int shift, high_bit;
        block32_slots(L, e, r, &low, &shift, &high, &high_bit);
        set_nibble(block.qs, e, (g[low] >> shift) & 0xF);
        if constexpr (L.highs != 0) qh |= static_cast<uint32_t>((g[high] >> high_bit) & 1) << e;
    }
    if constexpr (L.highs != 0) std::memcpy(block.qh, &qh, 4);
    std::memcpy(bytes, &block, sizeof block);
}

// IQ4_NL (fp16 d) and MXFP4 (exponent byte): the scale and the 4-bit indices.
template <QuantType kType, typename Block>
void put_nl(const uint8_t* bytes, int r, uint8_t* g) {
    constexpr const block32_group::Layout& L = layout32<kType>();
    Block block;
    std::memcpy(&block, bytes, sizeof block);
    if constexpr (kType == QuantType::MXFP4) {
        g[r] = block.e;
    } else {
        std::memcpy(g + 2 * r, &block.d, 2);
    }
    for (int e = 0; e < 32; ++e) {
        size_t low, high;
        int shift, high_bit;
        block32_slots(L, e, r, &low, &shift, &high, &high_bit);
        g[low] = static_cast<uint8_t>(g[low] | (nibble_of(block.qs, e) << shift));
    }
}

template <QuantType kType, typename Block>
void get_nl(const uint8_t* g, int r, uint8_t* bytes) {
    constexpr const block32_group::Layout& L = layout32<kType>();
    Block block{};
    if constexpr (kType == QuantType::MXFP4) {
        block.e = g[r];
    } else {
        std::memcpy(&block.d, g + 2 * r, 2);
    }
    for (int e = 0; e < 32; ++e) {
        size_t low, high;
        int shift, high_bit;
        block32_slots(L, e, r, &low, &shift, &high, &high_bit);
        set_nibble(block.qs, e, (g[low] >> shift) & 0xF);
    }
    std::memcpy(bytes, &block, sizeof block);
}

// --- Q2_K and Q3_K (kquant_group_layout.h) ---

// Element e's 2-bit code of a Q2_K / Q3_K block's qs (see BlockQ2_K).
int low2_of(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
void set_low2(uint8_t* qs, int e, int v) {
    qs[32 * (e / 128) + e % 32] = static_cast<uint8_t>(qs[32 * (e / 128) + e % 32] | (v << (2 * ((e % 128) / 32))));
}

// Element e's slot in a group chunk: vector m, bit pair t, byte i.
void low2_slot(int e, int* h, int* m, int* t, int* i) {
    *h = e / 64;
    *t = (e % 64) / 16;
    *m = (e % 16) / 4;
    *i = e % 4;
}

void put_q2_k(const uint8_t* bytes, int r, uint8_t* g) {
    using namespace q2k_group;
    BlockQ2_K block;
    std::memcpy(&block, bytes, sizeof block);
    std::memcpy(g + 2 * r, &block.d, 2);
    std::memcpy(g + kDmin + 2 * r, &block.dmin, 2);
    for (int j = 0; j < 16; ++j) g[kScales + 16 * j + r] = block.scales[j];
    for (int e = 0; e < kQK_K; ++e) {
        int h, m, t, i;
        low2_slot(e, &h, &m, &t, &i);
        uint8_t& byte = g[kQs + kChunkBytes * h + 64 * m + 4 * r + i];
        byte = static_cast<uint8_t>(byte | (low2_of(block.qs, e) << (2 * t)));
    }
}

void get_q2_k(const uint8_t* g, int r, uint8_t* bytes) {
    using namespace q2k_group;
    BlockQ2_K block{};
    std::memcpy(&block.d, g + 2 * r, 2);
    std::memcpy(&block.dmin, g + kDmin + 2 * r, 2);
    for (int j = 0; j < 16; ++j) block.scales[j] = g[kScales + 16 * j + r];
    for (int e = 0; e < kQK_K; ++e) {
        int h, m, t, i;
        low2_slot(e, &h, &m, &t, &i);
        set_low2(block.qs, e, (g[kQs + kChunkBytes * h + 64 * m + 4 * r + i] >> (2 * t)) & 3);
    }
    std::memcpy(bytes, &block, sizeof block);
}

void put_q3_k(const uint8_t* bytes, int r, uint8_t* g) {
    using namespace q3k_group;
    BlockQ3_K block;
    std::memcpy(&block, bytes, sizeof block);
    std::memcpy(g + 2 * r, &block.d, 2);
    for (int j = 0; j < 16; ++j) g[kScales + 16 * j + r] = static_cast<uint8_t>(q3_k_scale(j, block.scales));
    for (int e = 0; e < kQK_K; ++e) {
        int h, m, t, i;
        low2_slot(e, &h, &m, &t, &i);
        uint8_t* chunk = g + kQs + kChunkBytes * h;
        chunk[64 * m + 4 * r + i] = static_cast<uint8_t>(chunk[64 * m + 4 * r + i] | (low2_of(block.qs, e) << (2 * t)));
        const int step = 4 * m + t;
        const int high = (block.hmask[e % 32] >> (e / 32)) & 1;
        uint8_t& hb = chunk[kHighs + 64 * (step / 8) + 4 * r + i];
        hb = static_cast<uint8_t>(hb | (high << (step % 8)));
    }
}

void get_q3_k(const uint8_t* g, int r, uint8_t* bytes) {
    using namespace q3k_group;
    BlockQ3_K block{};
    std::memcpy(&block.d, g + 2 * r, 2);
    for (int j = 0; j < 16; ++j) {
        const int l = g[kScales + 16 * j + r];
        if (j < 8) {
            block.scales[j] = static_cast<uint8_t>(block.scales[j] | (l & 0xF));
        } else {
            block.scales[j - 8] = static_cast<uint8_t>(block.scales[j - 8] | ((l & 0xF) << 4));
        }
        block.scales[8 + j % 4] = static_cast<uint8_t>(block.scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    }
    for (int e = 0; e < kQK_K; ++e) {
        int h, m, t, i;
        low2_slot(e, &h, &m, &t, &i);
        const uint8_t* chunk = g + kQs + kChunkBytes * h;
        set_low2(block.qs, e, (chunk[64 * m + 4 * r + i] >> (2 * t)) & 3);
        const int step = 4 * m + t;
        const int high = (chunk[kHighs + 64 * (step / 8) + 4 * r + i] >> (step % 8)) & 1;
        block.hmask[e % 32] = static_cast<uint8_t>(block.hmask[e % 32] | (high << (e / 32)));
    }
    std::memcpy(bytes, &block, sizeof block);
}

// --- canonical steps ---

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


// A step through the type's own block step (the scalar reference's per-block
// function, which is the canonical order's definition).
template <typename WBlock, typename XBlock, void (*kGet)(const uint8_t*, int, uint8_t*),
          float (*kStep)(const WBlock&, const XBlock&, float)>
float step_via(const uint8_t* g, int r, const uint8_t* x_block, float acc) {
    WBlock w;
    kGet(g, r, reinterpret_cast<uint8_t*>(&w));
    XBlock x;
    std::memcpy(&x, x_block, sizeof x);
    return kStep(w, x, acc);
}

// Adapters from the typed put/get above to the table's byte signatures.
template <typename Block, void (*kPut)(const Block&, int, uint8_t*)>
void put_bytes(const uint8_t* bytes, int r, uint8_t* g) {
    Block block;
    std::memcpy(&block, bytes, sizeof block);
    kPut(block, r, g);
}

template <typename Block, void (*kGet)(const uint8_t*, int, Block&)>
void get_bytes(const uint8_t* g, int r, uint8_t* bytes) {
    Block block;
    kGet(g, r, block);
    std::memcpy(bytes, &block, sizeof block);
}

float q4_0_step(const uint8_t* g, int r, const uint8_t* x_block, float acc) {
    BlockQ8_0 x;
    std::memcpy(&x, x_block, sizeof x);
    return int8_canonical_step(QuantType::Q4_0, g, r, x, acc);
}

float q8_0_step(const uint8_t* g, int r, const uint8_t* x_block, float acc) {
    BlockQ8_0 x;
    std::memcpy(&x, x_block, sizeof x);
    return int8_canonical_step(QuantType::Q8_0, g, r, x, acc);
}

float q4_k_step(const uint8_t* g, int r, const uint8_t* x_block, float acc) {
    BlockQ8_K x;
    std::memcpy(&x, x_block, sizeof x);
    return q4_k_canonical_step(g, r, x, acc);
}

// NVFP4 (nvfp4_group_layout.h): the four scale bytes, the codes regrouped
// into MXFP4's order per 32 elements.
void put_nvfp4(const BlockNVFP4& block, int r, uint8_t* g) {
    for (int j = 0; j < 4; ++j) g[16 * j + r] = block.d[j];
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 4; ++i) {
                const int e = 4 * k + i;  // within each of the two sub-blocks
                const int lo = (block.qs[16 * h + (e & 7)] >> (e < 8 ? 0 : 4)) & 0xF;
                const int hi = (block.qs[16 * h + 8 + (e & 7)] >> (e < 8 ? 0 : 4)) & 0xF;
                g[nvfp4_group::kQs + 256 * h + 64 * k + 4 * r + i] = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
    }
}

void get_nvfp4(const uint8_t* g, int r, BlockNVFP4& block) {
    block = BlockNVFP4{};
    for (int j = 0; j < 4; ++j) block.d[j] = g[16 * j + r];
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 4; ++i) {
                const int e = 4 * k + i;
                const uint8_t byte = g[nvfp4_group::kQs + 256 * h + 64 * k + 4 * r + i];
                const int shift = e < 8 ? 0 : 4;
                block.qs[16 * h + (e & 7)] = static_cast<uint8_t>(block.qs[16 * h + (e & 7)] | ((byte & 0xF) << shift));
                block.qs[16 * h + 8 + (e & 7)] = static_cast<uint8_t>(block.qs[16 * h + 8 + (e & 7)] | ((byte >> 4) << shift));
            }
        }
    }
}

// The grid I-quants' group block is the 16 rows' blocks back to back, as
// GGUF holds them: their kernels are bound by point lookups, not by loads,
// so they gain nothing from splitting fields across rows; the group still
// lets them read each activation block once for 16 rows.
template <typename Block>
void put_interleaved(const uint8_t* bytes, int r, uint8_t* g) {
    std::memcpy(g + sizeof(Block) * static_cast<size_t>(r), bytes, sizeof(Block));
}

template <typename Block>
void get_interleaved(const uint8_t* g, int r, uint8_t* bytes) {
    std::memcpy(bytes, g + sizeof(Block) * static_cast<size_t>(r), sizeof(Block));
}

constexpr size_t kRows = kGroupRows;

#define TESSERA_GRID_CODEC(TYPE, Block, step)                                                                    \
    {QuantType::TYPE, kQK_K, sizeof(Block), kRows * sizeof(Block), 0, 0, put_interleaved<Block>,             \
     get_interleaved<Block>, step_via<Block, BlockQ8_K, get_interleaved<Block>, step>}

// F16, BF16: a row's piece (16 or 32 elements, kBytes) is row r's slice of a chunk.
template <size_t kBytes>
void put_piece(const uint8_t* block, int r, uint8_t* g) { std::memcpy(g + kBytes * r, block, kBytes); }
template <size_t kBytes>
void get_piece(const uint8_t* g, int r, uint8_t* block) { std::memcpy(block, g + kBytes * r, kBytes); }

const GroupCodec kCodecs[] = {
    // No step: a float row's canonical order keeps 16 lanes (float_canonical.h).
    {QuantType::F16, 16, 32, kRows * 32, 0, 0, put_piece<32>, get_piece<32>, nullptr},
    {QuantType::BF16, 32, 64, kRows * 64, 0, 0, put_piece<64>, get_piece<64>, nullptr},
    {QuantType::Q4_0, 32, sizeof(BlockQ4_0), kRows * sizeof(BlockQ4_0), 0, 0, put_bytes<BlockQ4_0, put_q4_0<BlockQ4_0>>,
     get_bytes<BlockQ4_0, get_q4_0<BlockQ4_0>>, q4_0_step},
    {QuantType::Q8_0, 32, sizeof(BlockQ8_0), kRows * sizeof(BlockQ8_0), 0x80, kQ8_0Qs, put_bytes<BlockQ8_0, put_q8_0>,
     get_bytes<BlockQ8_0, get_q8_0>, q8_0_step},
    {QuantType::Q4_K, kQK_K, sizeof(BlockQ4_K), kQ4_KQs + kRows * kQK_K / 2, 0, 0, put_bytes<BlockQ4_K, put_q4_k>,
     get_bytes<BlockQ4_K, get_q4_k>, q4_k_step},
    {QuantType::Q5_K, kQK_K, sizeof(BlockQ5_K), static_cast<size_t>(q5k_group::kBlockBytes), 0, 0,
     put_bytes<BlockQ5_K, put_q5_k>, get_bytes<BlockQ5_K, get_q5_k>,
     step_via<BlockQ5_K, BlockQ8_K, get_bytes<BlockQ5_K, get_q5_k>, q5_k_block_step>},
    {QuantType::Q6_K, kQK_K, sizeof(BlockQ6_K), static_cast<size_t>(q6k_group::kBlockBytes), 0, 0,
     put_bytes<BlockQ6_K, put_q6_k>, get_bytes<BlockQ6_K, get_q6_k>,
     step_via<BlockQ6_K, BlockQ8_K, get_bytes<BlockQ6_K, get_q6_k>, q6_k_block_step>},
    {QuantType::IQ4_XS, kQK_K, sizeof(BlockIQ4_XS), static_cast<size_t>(iq4xs_group::kBlockBytes), 0, 0,
     put_bytes<BlockIQ4_XS, put_iq4_xs>, get_bytes<BlockIQ4_XS, get_iq4_xs>,
     step_via<BlockIQ4_XS, BlockQ8_K, get_bytes<BlockIQ4_XS, get_iq4_xs>, iq4_xs_block_step>},
    {QuantType::Q2_K, kQK_K, sizeof(BlockQ2_K), static_cast<size_t>(q2k_group::kBlockBytes), 0, 0, put_q2_k, get_q2_k,
     step_via<BlockQ2_K, BlockQ8_K, get_q2_k, q2_k_block_step>},
    {QuantType::Q3_K, kQK_K, sizeof(BlockQ3_K), static_cast<size_t>(q3k_group::kBlockBytes), 0, 0, put_q3_k, get_q3_k,
     step_via<BlockQ3_K, BlockQ8_K, get_q3_k, q3_k_block_step>},
    {QuantType::Q5_0, 32, sizeof(BlockQ5_0), static_cast<size_t>(block32_group::kQ5_0.bytes), 0, 0,
     put_q5<QuantType::Q5_0, BlockQ5_0>, get_q5<QuantType::Q5_0, BlockQ5_0>,
     step_via<BlockQ5_0, BlockQ8_0, get_q5<QuantType::Q5_0, BlockQ5_0>, q5_0_block_step>},
    {QuantType::Q4_1, 32, sizeof(BlockQ4_1), static_cast<size_t>(block32_group::kQ4_1.bytes), 0, 0,
     put_q5<QuantType::Q4_1, BlockQ4_1>, get_q5<QuantType::Q4_1, BlockQ4_1>,
     step_via<BlockQ4_1, BlockQ8_0, get_q5<QuantType::Q4_1, BlockQ4_1>, q4_1_block_step>},
    {QuantType::Q5_1, 32, sizeof(BlockQ5_1), static_cast<size_t>(block32_group::kQ5_1.bytes), 0, 0,
     put_q5<QuantType::Q5_1, BlockQ5_1>, get_q5<QuantType::Q5_1, BlockQ5_1>,
     step_via<BlockQ5_1, BlockQ8_0, get_q5<QuantType::Q5_1, BlockQ5_1>, q5_1_block_step>},
    {QuantType::IQ4_NL, 32, sizeof(BlockIQ4_NL), static_cast<size_t>(block32_group::kIQ4_NL.bytes), 0, 0,
     put_nl<QuantType::IQ4_NL, BlockIQ4_NL>, get_nl<QuantType::IQ4_NL, BlockIQ4_NL>,
     step_via<BlockIQ4_NL, BlockQ8_0, get_nl<QuantType::IQ4_NL, BlockIQ4_NL>, iq4_nl_block_step>},
    {QuantType::MXFP4, 32, sizeof(BlockMXFP4), static_cast<size_t>(block32_group::kMXFP4.bytes), 0, 0,
     put_nl<QuantType::MXFP4, BlockMXFP4>, get_nl<QuantType::MXFP4, BlockMXFP4>,
     step_via<BlockMXFP4, BlockQ8_0, get_nl<QuantType::MXFP4, BlockMXFP4>, mxfp4_block_step>},
    {QuantType::Q1_0, kQ1_0Block, sizeof(BlockQ1_0), static_cast<size_t>(q1_0_group::kBytes), 0, 0,
     put_bytes<BlockQ1_0, put_q4_0<BlockQ1_0>>, get_bytes<BlockQ1_0, get_q4_0<BlockQ1_0>>,
     step_via<BlockQ1_0, Q8_0x4, get_bytes<BlockQ1_0, get_q4_0<BlockQ1_0>>, q1_0_block_step>},
    {QuantType::Q2_0, kQ2_0Block, sizeof(BlockQ2_0), static_cast<size_t>(q1_0_group::kBytes), 0, 0,
     put_bytes<BlockQ2_0, put_q4_0<BlockQ2_0>>, get_bytes<BlockQ2_0, get_q4_0<BlockQ2_0>>,
     step_via<BlockQ2_0, Q8_0x2, get_bytes<BlockQ2_0, get_q4_0<BlockQ2_0>>, q2_0_block_step>},
    {QuantType::TQ2_0, kQK_K, sizeof(BlockTQ2_0), static_cast<size_t>(ternary_group::bytes_of(ternary_group::kTq2_0Words)), 0, 0,
     put_bytes<BlockTQ2_0, put_ternary<BlockTQ2_0, ternary_group::kTq2_0Words>>,
     get_bytes<BlockTQ2_0, get_ternary<BlockTQ2_0, ternary_group::kTq2_0Words>>,
     step_via<BlockTQ2_0, BlockQ8_K, get_bytes<BlockTQ2_0, get_ternary<BlockTQ2_0, ternary_group::kTq2_0Words>>, tq2_0_block_step>},
    {QuantType::TQ1_0, kQK_K, sizeof(BlockTQ1_0), static_cast<size_t>(ternary_group::bytes_of(ternary_group::kTq1_0Words)), 0, 0,
     put_bytes<BlockTQ1_0, put_ternary<BlockTQ1_0, ternary_group::kTq1_0Words>>,
     get_bytes<BlockTQ1_0, get_ternary<BlockTQ1_0, ternary_group::kTq1_0Words>>,
     step_via<BlockTQ1_0, BlockQ8_K, get_bytes<BlockTQ1_0, get_ternary<BlockTQ1_0, ternary_group::kTq1_0Words>>, tq1_0_block_step>},
    {QuantType::NVFP4, kNvfp4Block, sizeof(BlockNVFP4), static_cast<size_t>(nvfp4_group::kBytes), 0, 0,
     put_bytes<BlockNVFP4, put_nvfp4>, get_bytes<BlockNVFP4, get_nvfp4>,
     step_via<BlockNVFP4, Q8_0x2, get_bytes<BlockNVFP4, get_nvfp4>, nvfp4_block_step>},
    TESSERA_GRID_CODEC(IQ2_XXS, BlockIQ2_XXS, iq2_xxs_block_step),
    TESSERA_GRID_CODEC(IQ2_XS, BlockIQ2_XS, iq2_xs_block_step),
    TESSERA_GRID_CODEC(IQ2_S, BlockIQ2_S, iq2_s_block_step),
    TESSERA_GRID_CODEC(IQ3_XXS, BlockIQ3_XXS, iq3_xxs_block_step),
    TESSERA_GRID_CODEC(IQ3_S, BlockIQ3_S, iq3_s_block_step),
    TESSERA_GRID_CODEC(IQ1_S, BlockIQ1_S, iq1_s_block_step),
    TESSERA_GRID_CODEC(IQ1_M, BlockIQ1_M, iq1_m_block_step),
};
#undef TESSERA_GRID_CODEC

}  // namespace

const GroupCodec* group_codec(QuantType type) {
    for (const GroupCodec& codec : kCodecs) {
        if (codec.type == type) return &codec;
    }
    return nullptr;
}

}  // namespace tessera
