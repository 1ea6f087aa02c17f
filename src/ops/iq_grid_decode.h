// One 32-weight sub-block of a grid I-quant block as every kernel reads it:
// the point bytes of its 32 weights (4 words of 8), their signs as byte
// masks (0xFF: minus) and the odd scale factor 2 s + 1 of its first and
// second 16 weights. The scalar reference and the SIMD kernels all decode
// through these, so they read the same fields the same way.
#pragma once

#include "ops/iq_grid_blocks.h"
#include "ops/iq_grids.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <cstring>

namespace tessera {

struct IqTables {
    const uint64_t* points8;  // IQ2, IQ1: 8 bytes a point
    const uint32_t* points4;  // IQ3: 4 bytes a point
    const uint64_t* signs;    // sign byte -> mask
    const uint64_t* signs7;   // 7 sign bits -> mask with the parity sign
    const uint64_t* iq1_weights;  // IQ1: 8 p + 1 as int8 bytes (the kernels' weights at shift +1/8, times 8)
};

inline IqTables iq_tables(QuantType type) {
    const bool iq3 = type == QuantType::IQ3_XXS || type == QuantType::IQ3_S;
    const bool iq1 = type == QuantType::IQ1_S || type == QuantType::IQ1_M;
    return {iq3 ? nullptr : iq1 ? iq1_points() : iq2_points(type), iq3 ? iq3_points(type) : nullptr, iq_sign_masks(),
            iq_sign_masks_even(), iq1 ? iq1_shifted_points() : nullptr};
}

struct IqSub32 {
    uint64_t points[4];
    uint64_t signs[4];
    int scale_lo, scale_hi;  // 2 s + 1 of weights [0, 16) and [16, 32)
};

namespace iq_decode {

inline uint32_t u32_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint16_t u16_at(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline uint64_t pair(const IqTables& t, int i0, int i1) {
    return t.points4[i0] | static_cast<uint64_t>(t.points4[i1]) << 32;
}
inline int odd(int s) { return 2 * s + 1; }

}  // namespace iq_decode

// Whether a type's signs are stored as whole bytes (bit i of byte l: weight
// 8 l + i is negative), 4 per sub-block, rather than 7 bits and a parity:
// SIMD kernels then spread them without a table.
template <QuantType kType>
inline constexpr bool kIqSignBytes = kType == QuantType::IQ2_S || kType == QuantType::IQ3_S;

// The 4 sign bytes of sub-block j of such a type's block.
template <QuantType kType>
inline const uint8_t* iq_sign_bytes(const uint8_t* block, int j) {
    static_assert(kIqSignBytes<kType>);
    if constexpr (kType == QuantType::IQ2_S) return block + offsetof(BlockIQ2_S, qs) + kQK_K / 8 + 4 * j;
    return block + offsetof(BlockIQ3_S, signs) + 4 * j;
}

// Whether a type's scales are 4-bit fields, one for each half of a
// sub-block (IQ2_XS, IQ2_S: byte j, low then high nibble) or one for a whole
// sub-block (IQ3_S: nibble j of its 4 bytes), rather than the top bits of a
// sign word: SIMD kernels then widen them all at once.
template <QuantType kType>
inline constexpr bool kIqScaleNibbles =
    kType == QuantType::IQ2_XS || kType == QuantType::IQ2_S || kType == QuantType::IQ3_S;

// Those nibbles, little-endian: nibble 2j / 2j + 1 is sub-block j's low /
// high half (IQ2_XS, IQ2_S), nibble j sub-block j (IQ3_S).
template <QuantType kType>
inline uint64_t iq_scale_nibbles(const uint8_t* block) {
    static_assert(kIqScaleNibbles<kType>);
    uint64_t v = 0;
    if constexpr (kType == QuantType::IQ2_XS) std::memcpy(&v, block + offsetof(BlockIQ2_XS, scales), 8);
    if constexpr (kType == QuantType::IQ2_S) std::memcpy(&v, block + offsetof(BlockIQ2_S, scales), 8);
    if constexpr (kType == QuantType::IQ3_S) std::memcpy(&v, block + offsetof(BlockIQ3_S, scales), 4);
    return v;
}

// Whether a type's point indices take their top bits from the qh bytes
// (IQ2_S: 2 bits a point, qh[j] bits 2l, 2l + 1 for point l of sub-block j;
// IQ3_S: 1 bit, qh[j] bit i for point i of its 8): SIMD kernels then build
// a block's indices at once.
template <QuantType kType>
inline constexpr bool kIqHighBits = kType == QuantType::IQ2_S || kType == QuantType::IQ3_S;

// Sub-block j (0..7) of the block at `block` (its GGUF bytes). kSignBytes
// false: signs[] of the types with sign bytes is left unset (a kernel that
// spreads the bytes itself); kPoints false: points[] of kIqHighBits types
// (a kernel that builds the indices itself).
template <QuantType kType, bool kSignBytes = true, bool kPoints = true>
inline IqSub32 iq_decode32(const uint8_t* block, int j, const IqTables& t) {
    using namespace iq_decode;
    IqSub32 s;
    if constexpr (kType == QuantType::IQ2_XXS) {
        const uint8_t* q = block + offsetof(BlockIQ2_XXS, qs) + 8 * j;
        const uint32_t signs = u32_at(q + 4);
        for (int l = 0; l < 4; ++l) {
            s.points[l] = t.points8[q[l]];
            s.signs[l] = t.signs7[(signs >> (7 * l)) & 127];
        }
        s.scale_lo = s.scale_hi = odd(static_cast<int>(signs >> 28));
    } else if constexpr (kType == QuantType::IQ2_XS) {
        const uint8_t* q = block + offsetof(BlockIQ2_XS, qs) + 8 * j;
        for (int l = 0; l < 4; ++l) {
            const uint16_t v = u16_at(q + 2 * l);
            s.points[l] = t.points8[v & 511];
            s.signs[l] = t.signs7[v >> 9];
        }
        const uint8_t sc = block[offsetof(BlockIQ2_XS, scales) + j];
        s.scale_lo = odd(sc & 15);
        s.scale_hi = odd(sc >> 4);
    } else if constexpr (kType == QuantType::IQ2_S) {
        [[maybe_unused]] const uint8_t* qs = block + offsetof(BlockIQ2_S, qs);
        [[maybe_unused]] const int qh = block[offsetof(BlockIQ2_S, qh) + j];
        for (int l = 0; l < 4; ++l) {
            if constexpr (kPoints) s.points[l] = t.points8[qs[4 * j + l] | ((qh << (8 - 2 * l)) & 0x300)];
            if constexpr (kSignBytes) s.signs[l] = t.signs[iq_sign_bytes<kType>(block, j)[l]];
        }
        const uint8_t sc = block[offsetof(BlockIQ2_S, scales) + j];
        s.scale_lo = odd(sc & 15);
        s.scale_hi = odd(sc >> 4);
    } else if constexpr (kType == QuantType::IQ3_XXS) {
        const uint8_t* q = block + offsetof(BlockIQ3_XXS, qs) + 8 * j;
        const uint32_t signs = u32_at(block + offsetof(BlockIQ3_XXS, qs) + kQK_K / 4 + 4 * j);
        for (int l = 0; l < 4; ++l) {
            s.points[l] = pair(t, q[2 * l], q[2 * l + 1]);
            s.signs[l] = t.signs7[(signs >> (7 * l)) & 127];
        }
        s.scale_lo = s.scale_hi = odd(static_cast<int>(signs >> 28));
    } else {
        static_assert(kType == QuantType::IQ3_S, "a grid I-quant");
        [[maybe_unused]] const uint8_t* q = block + offsetof(BlockIQ3_S, qs) + 8 * j;
        [[maybe_unused]] const int qh = block[offsetof(BlockIQ3_S, qh) + j];
        [[maybe_unused]] const uint8_t* sg = iq_sign_bytes<kType>(block, j);
        for (int l = 0; l < 4; ++l) {
            if constexpr (kPoints) {
                s.points[l] = pair(t, q[2 * l] | ((qh << (8 - 2 * l)) & 256), q[2 * l + 1] | ((qh << (7 - 2 * l)) & 256));
            }
            if constexpr (kSignBytes) s.signs[l] = t.signs[sg[l]];
        }
        s.scale_lo = s.scale_hi = odd((block[offsetof(BlockIQ3_S, scales) + j / 2] >> (4 * (j % 2))) & 15);
    }
    return s;
}

// The fp16 d of a block (first in every grid type's block but IQ1_M's).
inline uint16_t iq_block_d(const uint8_t* block) { return iq_decode::u16_at(block); }

template <QuantType kType>
inline constexpr bool kIq1 = kType == QuantType::IQ1_S || kType == QuantType::IQ1_M;

// One 32-weight sub-block of an IQ1 block as every kernel reads it: its 4
// points (8 int8 levels -1, 0, 1 each), the sign of each 8's shift of 1/8
// (+1 or -1) and the odd scale 2 s + 1 of each 8 (IQ1_S: one for the 32,
// IQ1_M: one for each 16).
struct Iq1Sub32 {
    uint64_t points[4];
    int shift[4];
    int scale[4];
};

// Sub-block j (0..7) of the IQ1 block at `block` (its GGUF bytes).
template <QuantType kType>
inline Iq1Sub32 iq1_decode32(const uint8_t* block, int j, const uint64_t* points) {
    using namespace iq_decode;
    static_assert(kIq1<kType>);
    Iq1Sub32 s;
    if constexpr (kType == QuantType::IQ1_S) {
        const uint8_t* qs = block + offsetof(BlockIQ1_S, qs) + 4 * j;
        const int qh = u16_at(block + offsetof(BlockIQ1_S, qh) + 2 * j);
        for (int l = 0; l < 4; ++l) {
            s.points[l] = points[qs[l] | (((qh >> (3 * l)) & 7) << 8)];
            s.shift[l] = qh & 0x8000 ? -1 : 1;
            s.scale[l] = odd((qh >> 12) & 7);
        }
    } else {
        const uint8_t* qs = block + offsetof(BlockIQ1_M, qs) + 4 * j;
        const uint8_t* qh = block + offsetof(BlockIQ1_M, qh) + 2 * j;
        const int sc = u16_at(block + offsetof(BlockIQ1_M, scales) + 2 * (j / 2)) >> (6 * (j % 2));
        for (int l = 0; l < 4; ++l) {
            const int h = qh[l / 2] >> (4 * (l % 2));  // this point's nibble: top bits, then the shift's sign
            s.points[l] = points[qs[l] | ((h & 7) << 8)];
            s.shift[l] = h & 8 ? -1 : 1;
            s.scale[l] = odd((sc >> (3 * (l / 2))) & 7);
        }
    }
    return s;
}

// The fp16 d of an IQ1 block: IQ1_S's field, or IQ1_M's four top nibbles of
// its scale words.
template <QuantType kType>
inline uint16_t iq1_block_d(const uint8_t* block) {
    using namespace iq_decode;
    static_assert(kIq1<kType>);
    if constexpr (kType == QuantType::IQ1_S) {
        return u16_at(block);
    } else {
        const uint8_t* sc = block + offsetof(BlockIQ1_M, scales);
        return static_cast<uint16_t>((u16_at(sc) >> 12) | ((u16_at(sc + 2) >> 8) & 0x00F0) |
                                     ((u16_at(sc + 4) >> 4) & 0x0F00) | (u16_at(sc + 6) & 0xF000));
    }
}

// S of one IQ1 block against 256 activation codes: each 8 weights' points and
// shift at 8 times their value (8 p +- 1, integers), times their scale:
//   S = sum (2 s + 1) (8 sum_i p_i y_i + shift sum_i y_i)
// so the block's value is d * S / 8 (kIqStepFactor), exact in float (|S| < 2^23).
template <QuantType kType>
inline int32_t iq1_block_sum(const uint8_t* block, const int8_t* y, const uint64_t* points) {
    int32_t total = 0;
    for (int j = 0; j < 8; ++j) {
        const Iq1Sub32 s = iq1_decode32<kType>(block, j, points);
        for (int l = 0; l < 4; ++l) {
            int32_t dot = 0, sum = 0;
            for (int i = 0; i < 8; ++i) {
                const int yi = y[32 * j + 8 * l + i];
                dot += static_cast<int8_t>((s.points[l] >> (8 * i)) & 0xFF) * yi;
                sum += yi;
            }
            total += s.scale[l] * (8 * dot + s.shift[l] * sum);
        }
    }
    return total;
}

// The fp16 d of a block of any grid type.
template <QuantType kType>
inline uint16_t iq_block_d_of(const uint8_t* block) {
    if constexpr (kIq1<kType>) return iq1_block_d<kType>(block);
    else return iq_block_d(block);
}

// k of the canonical step (iq_grid_scalar.h).
template <QuantType kType>
inline constexpr float kIqStepFactor = kType == QuantType::IQ3_XXS ? 0.25f : kType == QuantType::IQ3_S ? 1.0f : 0.125f;

// S of one block against 256 activation codes, through the decoder.
template <QuantType kType>
inline int32_t iq_block_sum(const uint8_t* block, const int8_t* y, const IqTables& t) {
    if constexpr (kIq1<kType>) {
        return iq1_block_sum<kType>(block, y, t.points8);
    } else {
        int32_t total = 0;
        for (int j = 0; j < 8; ++j) {
            const IqSub32 s = iq_decode32<kType>(block, j, t);
            for (int l = 0; l < 4; ++l) {
                int32_t part = 0;
                for (int i = 0; i < 8; ++i) {
                    const int v = static_cast<int>((s.points[l] >> (8 * i)) & 0xFF);
                    const int sign = (s.signs[l] >> (8 * i)) & 1 ? -1 : 1;
                    part += sign * v * y[32 * j + 8 * l + i];
                }
                total += (l < 2 ? s.scale_lo : s.scale_hi) * part;
            }
        }
        return total;
    }
}

}  // namespace tessera
