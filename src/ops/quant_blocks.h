// Block structs of the quantized formats, byte-for-byte as llama.cpp lays them
// out in GGUF files: 32 elements a block, an fp16 scale `d` first (MXFP4's
// is a power of two in one byte).
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int kQ8_0Block = 32;
inline constexpr int kQ4_0Block = 32;

// Q8_0: value = d * qs[i].
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

// Q4_0: value i (i < 16) = d * ((qs[i] & 15) - 8); value i + 16 = d * ((qs[i] >> 4) - 8).
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQ4_0Block / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

// Q5_0: value = d * (q - 16), q a 5-bit code: its low 4 bits as Q4_0's
// nibbles (element i < 16 low, i + 16 high nibble of qs[i]), bit 4 of
// element i in bit i of qh (little-endian).
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");

// Q4_1: value = d * q + m, q a 4-bit code in Q4_0's nibble order.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");

// Q5_1: value = d * q + m, q a 5-bit code laid out as Q5_0's.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes");

// IQ4_NL: value = d * kIq4nlValues[q], q a 4-bit index in Q4_0's nibble order.
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block must be 18 bytes");

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS (llama.cpp's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP microscaling FP4): value = kMxfp4Values[q] * 2^(e - 128), q a
// 4-bit E2M1 code in Q4_0's nibble order. The table holds twice E2M1's
// values (so they are integers), hence e - 128 rather than e - 127.
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block must be 17 bytes");

inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float, subnormal for e < 2 (llama.cpp's
// ggml_e8m0_to_fp32_half, bit for bit).
inline float e8m0_half_to_float(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// Q1_0 (1-bit, 128 elements): value = +d where element i's bit (bit i % 8 of
// qs[i / 8]) is set, -d where it is clear; d the mean magnitude of the block.
struct BlockQ1_0 {
    uint16_t d;  // fp16
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ1_0) == 18, "Q1_0 block must be 18 bytes");

// Q2_0 (2-bit, 64 elements): value = (q - 1) * d, q in [0, 4) at bits
// 2 (i % 4) of qs[i / 4]; d the block's largest magnitude.
struct BlockQ2_0 {
    uint16_t d;  // fp16
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ2_0) == 18, "Q2_0 block must be 18 bytes");

// The Q8_0 activation blocks beside one 64-element (NVFP4, Q2_0) or
// 128-element (Q1_0) weight block.
struct Q8_0x2 {
    BlockQ8_0 b[2];
};
static_assert(sizeof(Q8_0x2) == 2 * sizeof(BlockQ8_0), "two Q8_0 blocks back to back");
struct Q8_0x4 {
    BlockQ8_0 b[4];
};
static_assert(sizeof(Q8_0x4) == 4 * sizeof(BlockQ8_0), "four Q8_0 blocks back to back");

// NVFP4 (NVIDIA's FP4, as ModelOpt checkpoints carry it; 64 elements, 4.5
// bits a weight): four sub-blocks of 16 E2M1 codes, each with its own UE4M3
// scale byte. Sub-block s's byte j holds element 16s + j in its low nibble
// and 16s + 8 + j in its high one; value = kMxfp4Values[q] * ue4m3_half(d[s]).
struct BlockNVFP4 {
    uint8_t d[4];
    uint8_t qs[32];
};
static_assert(sizeof(BlockNVFP4) == 36, "NVFP4 block must be 36 bytes");

// A UE4M3 scale byte (4 exponent bits of bias 7, 3 mantissa bits; bit 7
// ignored, 0x7F read as 0) as a float, halved because kMxfp4Values are twice
// E2M1's values: llama.cpp's ggml_ue4m3_to_fp32, bit for bit. Every value is a
// normal float (the smallest, 2^-10).
inline float ue4m3_half_to_float(uint8_t b) {
    b &= 0x7F;
    if (b == 0 || b == 0x7F) return 0.0f;
    const uint32_t exp = b >> 3, man = b & 7u;
    if (exp == 0) return static_cast<float>(man) * 0x1p-10f;
    const uint32_t bits = (static_cast<uint32_t>(b) << 20) + (119u << 23);
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// Element i (< 32) of 16 bytes of 4-bit codes in Q4_0's nibble order (Q4_0,
// IQ4_NL, MXFP4, an IQ4_XS sub-block): low nibbles first, then high.
inline int q4_nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

}  // namespace tessera
