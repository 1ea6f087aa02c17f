// Block structs of the grid I-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M), byte for byte as ggml lays them out in GGUF files.
// Each group of 8 (IQ1, IQ2) or 4 (IQ3) weights is one point of a fixed set
// (ops/iq_grids.h); IQ2/IQ3 give each weight a sign, IQ1's levels are -1, 0,
// 1 themselves, shifted by +-1/8 per group. Sub-blocks of 16 or 32 share a
// small scale s, the super-block an fp16 d. Kernels read them through
// memcpy, never a cast.
#pragma once

#include "ops/kquant_blocks.h"

#include <cstdint>

namespace tessera {

// IQ2_XXS (2.06 bpw): per 32 weights two uint32: the first holds 4 point
// indices (a byte each, 256 points), the second 4 x 7 sign bits (the 8th of
// each 8 is their parity) and the 4-bit scale in its top bits.
// value = d * (0.5 + s) / 4 * point * sign.
struct BlockIQ2_XXS {
    uint16_t d;
    uint16_t qs[kQK_K / 8];
};
static_assert(sizeof(BlockIQ2_XXS) == 66, "IQ2_XXS block must be 66 bytes");

// IQ2_XS (2.31 bpw): per 8 weights a uint16 of a 9-bit point index (512
// points) and 7 sign bits above it; a 4-bit scale per 16 weights.
struct BlockIQ2_XS {
    uint16_t d;
    uint16_t qs[kQK_K / 8];
    uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_XS) == 74, "IQ2_XS block must be 74 bytes");

// IQ2_S (2.56 bpw): per 8 weights the low 8 bits of a 10-bit point index in
// qs[0, 32) (1024 points), its top 2 bits in qh, a full sign byte in
// qs[32, 64); a 4-bit scale per 16 weights.
struct BlockIQ2_S {
    uint16_t d;
    uint8_t qs[kQK_K / 4];
    uint8_t qh[kQK_K / 32];
    uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_S) == 82, "IQ2_S block must be 82 bytes");

// IQ3_XXS (3.06 bpw): per 4 weights a byte point index (256 points) in
// qs[0, 64); per 32 weights a uint32 at qs[64 + 4 j] of 4 x 7 sign bits and
// the 4-bit scale on top. value = d * (0.5 + s) / 2 * point * sign.
struct BlockIQ3_XXS {
    uint16_t d;
    uint8_t qs[3 * kQK_K / 8];
};
static_assert(sizeof(BlockIQ3_XXS) == 98, "IQ3_XXS block must be 98 bytes");

// IQ3_S (3.44 bpw): per 4 weights the low 8 bits of a 9-bit point index
// (512 points), the 9th bit in qh; full sign bytes; a 4-bit scale per 32
// weights (two a byte). value = d * (1 + 2 s) * point * sign.
struct BlockIQ3_S {
    uint16_t d;
    uint8_t qs[kQK_K / 4];
    uint8_t qh[kQK_K / 32];
    uint8_t signs[kQK_K / 8];
    uint8_t scales[kQK_K / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110, "IQ3_S block must be 110 bytes");

// IQ1_S (1.56 bpw): per 8 weights the low 8 bits of an 11-bit point index
// (2048 points of levels -1, 0, 1) in qs; per 32 weights a uint16 qh of the
// 4 points' top 3 bits (bits 3 l), a 3-bit scale s (bits 12..14) and the sign
// of the shift (bit 15). value = d * (2 s + 1) * (point + (bit 15 ? -1 : 1) / 8).
struct BlockIQ1_S {
    uint16_t d;
    uint8_t qs[kQK_K / 8];
    uint16_t qh[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50, "IQ1_S block must be 50 bytes");

// IQ1_M (1.75 bpw): the same points (low 8 bits in qs); per 16 weights a
// byte of qh with the two points' top 3 bits (bits 0..2, 4..6) and their
// shift signs (bits 3, 7); a 3-bit scale per 16 weights, four to a uint16 of
// scales, whose top nibbles together hold the fp16 d (no d field).
struct BlockIQ1_M {
    uint8_t qs[kQK_K / 8];
    uint8_t qh[kQK_K / 16];
    uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_M) == 56, "IQ1_M block must be 56 bytes");

}  // namespace tessera
