// Block structs of the K-quant formats, byte-for-byte as llama.cpp lays them
// out in GGUF files (QK_K = 256 elements per super-block). Kernels read them
// through memcpy, never through a cast, since rows may be unaligned.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int kQK_K = 256;

// Q4_K: 8 sub-blocks of 32. Sub-block j has a 6-bit scale sc[j] and 6-bit
// min m[j] packed in `scales` (see q4_k_scale_min); element value is
// d * sc[j] * q - dmin * m[j], q a 4-bit code. Per 64 elements, qs holds 32
// bytes: the low nibbles are the first 32 elements, the high nibbles the next.
struct BlockQ4_K {
    uint16_t d;     // fp16 super-block scale of the sub-block scales
    uint16_t dmin;  // fp16 super-block scale of the sub-block mins
    uint8_t scales[12];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

// Q6_K: 16 sub-blocks of 16, value = d * scales[j] * (q - 32), q a 6-bit code
// split into 4 low bits (ql) and 2 high bits (qh); see q6_k_to_float.
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// Q5_K: Q4_K's scales and mins; a 5-bit code's low 4 bits as Q4_K's nibbles,
// bit 4 of element 64g + l (l < 32) in bit 2g of qh[l], of 64g + 32 + l in
// bit 2g + 1.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[kQK_K / 8];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");

// Q2_K: 16 sub-blocks of 16, value = d * (scales[j] & 15) * q - dmin *
// (scales[j] >> 4), q a 2-bit code: element 128h + 32k + l (l < 32) in bits
// 2k, 2k + 1 of qs[32h + l].
struct BlockQ2_K {
    uint8_t scales[kQK_K / 16];
    uint8_t qs[kQK_K / 4];
    uint16_t d;
    uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");

// Q3_K: 16 sub-blocks of 16, value = d * (s_j - 32) * (q - 4), s_j a 6-bit
// scale (q3_k_scale), q a 3-bit code: its low 2 bits as Q2_K's, its high bit
// (element i) in bit i / 32 of hmask[i % 32].
struct BlockQ3_K {
    uint8_t hmask[kQK_K / 8];
    uint8_t qs[kQK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");

// IQ4_XS: 8 sub-blocks of 32, value = d * (s_j - 32) * kIq4nlValues[q], s_j
// a 6-bit scale (iq4_xs_scale), q a 4-bit index laid out per sub-block as
// IQ4_NL's (16 bytes each).
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQK_K / 64];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block must be 136 bytes");

// The 6-bit code (0..63; the value is code - 32) of element i of a Q6_K
// block. Each half of 128 elements uses 64 bytes of ql and 32 of qh; within
// it, quarter k (32 elements) takes ql's low (k = 0, 1) or high (k = 2, 3)
// nibbles of bytes [32 (k % 2), +32) and bits 2k, 2k+1 of qh.
inline int q6_k_code(const BlockQ6_K& block, int i) {
    const int half = i / 128, k = (i % 128) / 32, l = i % 32;
    const uint8_t ql = block.ql[64 * half + 32 * (k % 2) + l];
    const uint8_t qh = block.qh[32 * half + l];
    const int low = k < 2 ? (ql & 0xF) : (ql >> 4);
    return low | (((qh >> (2 * k)) & 3) << 4);
}

// Sets element i's code (the block's ql/qh bits of it must be zero).
inline void q6_k_set_code(BlockQ6_K& block, int i, int code) {
    const int half = i / 128, k = (i % 128) / 32, l = i % 32;
    block.ql[64 * half + 32 * (k % 2) + l] |= static_cast<uint8_t>((code & 0xF) << (k < 2 ? 0 : 4));
    block.qh[32 * half + l] |= static_cast<uint8_t>((code >> 4) << (2 * k));
}

// The 5-bit code of element i of a Q5_K block, and its setter (the block's
// bits of it must be zero).
inline int q5_k_code(const BlockQ5_K& block, int i) {
    const int g = i / 64, half = (i % 64) / 32, l = i % 32;
    const int low = (block.qs[32 * g + l] >> (4 * half)) & 0xF;
    return low | (((block.qh[l] >> (2 * g + half)) & 1) << 4);
}

inline void q5_k_set_code(BlockQ5_K& block, int i, int code) {
    const int g = i / 64, half = (i % 64) / 32, l = i % 32;
    block.qs[32 * g + l] |= static_cast<uint8_t>((code & 0xF) << (4 * half));
    block.qh[l] |= static_cast<uint8_t>(((code >> 4) & 1) << (2 * g + half));
}

// Q8_K: the activation type K-quant weights are multiplied with. value =
// d * qs[i]; bsums[k] = sum of qs[16k .. 16k+15], so the constant parts of
// a weight block (Q4_K's mins, Q6_K's -32 offset) cost one product per 16.
struct BlockQ8_K {
    float d;  // fp32, not fp16
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");

// The ternary types (BitNet b1.58, TriLM; 256 elements, codes q - 1 in
// {-1, 0, 1} times d, d the block's largest magnitude).
// TQ2_0: 2 bits a code; element 128 h + 32 l + m is bits 2l of qs[32 h + m].
struct BlockTQ2_0 {
    uint8_t qs[kQK_K / 4];
    uint16_t d;  // fp16
};
static_assert(sizeof(BlockTQ2_0) == 66, "TQ2_0 block must be 66 bytes");
// TQ1_0: 5 trits a byte in qs (elements 32 l + m from qs[m], m < 32, then
// 160 + 16 l + m from qs[32 + m], m < 16), 4 in qh (240 + 4 l + j from
// qh[j]); trit l of byte b is (uint8_t(b * 3^l) * 3) >> 8.
struct BlockTQ1_0 {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;  // fp16
};
static_assert(sizeof(BlockTQ1_0) == 54, "TQ1_0 block must be 54 bytes");

// llama.cpp's get_scale_min_k4: the 6-bit scale and min of sub-block j of a
// Q4_K (or Q5_K) block. Bytes 0-3 hold scales 0-3 and bytes 4-7 mins 0-3 in
// their low 6 bits; bytes 8-11 hold the low 4 bits of scales 4-7 (low nibble)
// and mins 4-7 (high nibble), whose top 2 bits sit in the top 2 bits of bytes
// 0-3 (scales) and 4-7 (mins).
inline void q4_k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

// The 6-bit scale (0..63, the value's factor is that - 32) of sub-block j
// of a Q3_K block: low 4 bits in the low (j < 8) or high nibble of
// scales[j % 8], high 2 bits at bit 2 (j / 4) of scales[8 + j % 4].
inline int q3_k_scale(int j, const uint8_t* scales) {
    const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

// The 6-bit scale (0..63) of sub-block j of an IQ4_XS block.
inline int iq4_xs_scale(int j, uint8_t scales_l_byte, uint16_t scales_h) {
    return ((scales_l_byte >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4);
}

}  // namespace tessera
