// The grid I-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) in the group
// layout (16 rows' GGUF blocks back to back, ops/group_codecs.cpp) against
// Q8_K activations on 256-bit x86 vectors (AVX2, and AVX-512 without VNNI;
// with it, iq_grid_groups_vnni-inl.h gathers instead). Per row and 32 weights:
// the 4 point words by table lookups (ops/iq_grid_decode.h; IQ2_S's and
// IQ3_S's indices built a block at a time in vector registers; IQ1's too for
// one column; IQ1's scales and shift signs pulled out
// a block at a time by pext/pdep, one shuffle per sub-block), the sign
// masks by table lookups (IQ2_XS) or spread in registers from sign bytes
// (IQ2_XXS's and IQ3_XXS's made from their sign words a block at a time);
// the 4-bit scales widened a block at a time,
// maddubs of the unsigned point bytes with the activations negated where
// the signs say (|y| <= 127: no saturation), madd with the sub-blocks' odd
// scales (vpdpwssd with AVX-VNNI); per block and row S exactly, then the canonical step
// acc = fma(d_x, d_w * (k * float(S)), acc) for 8 rows a vector. Included by
// iq_grids_hwy.cpp once per target (hence the toggling include guard).

#if defined(TESSERA_OPS_IQ_GRID_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ_GRID_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_IQ_GRID_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_IQ_GRID_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/iq_grid_decode.h"
#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace iq_grid_avx2 {

// The sign bytes of 32 weights (kIqSignBytes) as byte masks (0xFF: minus):
// byte l spread over vector word l, each byte tested against its own bit.
// The same masks as the table lookups give, in 4 vector operations instead
// of 4 scalar loads and the inserts that gather them.
HWY_INLINE __m256i sign_byte_masks(const uint8_t* bytes) {
    uint32_t four;
    std::memcpy(&four, bytes, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(four)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// IQ2_XXS and IQ3_XXS keep each sub-block's signs in a 32-bit word: 4
// groups of 7 sign bits (the 8th sign of each group is their parity, so
// that a group has an even count of minus signs) under the 4-bit scale.
template <QuantType kType>
inline constexpr bool kIqSignWords = kType == QuantType::IQ2_XXS || kType == QuantType::IQ3_XXS;

// A block's 8 sign words, word j in 32-bit lane j.
template <QuantType kType>
HWY_INLINE __m256i sign_words(const uint8_t* block) {
    if constexpr (kType == QuantType::IQ3_XXS) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + offsetof(BlockIQ3_XXS, qs) + kQK_K / 4));
    } else {
        // IQ2_XXS: word j follows sub-block j's 4 point bytes, at 8 j + 4.
        const uint8_t* qs = block + offsetof(BlockIQ2_XXS, qs);
        const __m256 lo = _mm256_loadu_ps(reinterpret_cast<const float*>(qs));
        const __m256 hi = _mm256_loadu_ps(reinterpret_cast<const float*>(qs + 32));
        // Odd words: j = 0 1 4 5 | 2 3 6 7, then the 64-bit pairs in order.
        const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0xDD));
        return _mm256_permute4x64_epi64(odd, 0xD8);
    }
}

// The sign bytes those words stand for (the bytes kIqSignBytes types store:
// group l of word j is byte l of lane j), each group moved to its byte and
// its parity set as bit 7: a block's 32 table lookups, and the inserts that
// gather them, in 19 vector operations.
HWY_INLINE __m256i sign_bytes_of_words(__m256i w) {
    __m256i v = _mm256_and_si256(w, _mm256_set1_epi32(0x7F));
    v = _mm256_or_si256(v, _mm256_and_si256(_mm256_slli_epi32(w, 1), _mm256_set1_epi32(0x7F00)));
    v = _mm256_or_si256(v, _mm256_and_si256(_mm256_slli_epi32(w, 2), _mm256_set1_epi32(0x7F0000)));
    v = _mm256_or_si256(v, _mm256_and_si256(_mm256_slli_epi32(w, 3), _mm256_set1_epi32(0x7F000000)));
    // Bit 0 of each byte folded into the parity of that byte alone (each
    // shift's bits from the next byte land above bit 0 and are masked off).
    __m256i p = _mm256_xor_si256(v, _mm256_srli_epi32(v, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    return _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(0x01010101)), 7));
}

// IQ1's 3-bit scales as nibbles, pulled out of their words by pext and
// spread by pdep (BMI2, part of every target this file compiles for): IQ1_M's
// 16, each 16 weights' at 3 i of its sub-block pair's 12-bit field; IQ1_S's 8,
// a sub-block's at bits 12..14 of its qh word.
template <QuantType kType>
HWY_INLINE uint64_t iq1_scale_nibbles(const uint8_t* block) {
    if constexpr (kType == QuantType::IQ1_M) {
        uint64_t words;
        std::memcpy(&words, block + offsetof(BlockIQ1_M, scales), 8);
        return _pdep_u64(_pext_u64(words, 0x0FFF0FFF0FFF0FFFull), 0x7777777777777777ull);
    } else {
        uint64_t lo, hi;
        std::memcpy(&lo, block + offsetof(BlockIQ1_S, qh), 8);
        std::memcpy(&hi, block + offsetof(BlockIQ1_S, qh) + 8, 8);
        constexpr uint64_t kScaleBits = 0x7000700070007000ull;
        return _pdep_u64(_pext_u64(lo, kScaleBits) | (_pext_u64(hi, kScaleBits) << 12), 0x77777777ull);
    }
}

// The types whose odd scales odd_scale_bytes widens a block at a time.
template <QuantType kType>
inline constexpr bool kScaleBytesOfBlock = kIqScaleNibbles<kType> || kIq1<kType>;

// kScaleBytesOfBlock types: a block's odd scales 2 s + 1 as bytes, in both
// 128-bit lanes (nibble i of iq_scale_nibbles or iq1_scale_nibbles at byte i).
template <QuantType kType>
HWY_INLINE __m256i odd_scale_bytes(const uint8_t* block) {
    uint64_t fields;
    if constexpr (kIq1<kType>) {
        fields = iq1_scale_nibbles<kType>(block);
    } else {
        fields = iq_scale_nibbles<kType>(block);
    }
    const __m128i v = _mm_cvtsi64_si128(static_cast<int64_t>(fields));
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(nibbles, nibbles), _mm_set1_epi8(1)));
}

// The vpshufb masks that take sub-block j's scales out of odd_scale_bytes as
// 16-bit words: its first 16 weights' scale in the low lane, its second 16's
// in the high lane (the same byte for IQ3_S and IQ1_S: a scale per 32).
template <QuantType kType>
struct ScaleMasks {
    alignas(32) uint8_t bytes[8][32];
    constexpr ScaleMasks() : bytes() {
        for (int j = 0; j < 8; ++j) {
            for (int i = 0; i < 32; i += 2) {
                const int half = i / 16;
                const bool per32 = kType == QuantType::IQ3_S || kType == QuantType::IQ1_S;
                bytes[j][i] = static_cast<uint8_t>(per32 ? j : 2 * j + half);
                bytes[j][i + 1] = 0x80;  // zero: the word's high byte
            }
        }
    }
};
template <QuantType kType>
inline constexpr ScaleMasks<kType> kScaleMasks{};

// kIqHighBits types: every point index of a block (IQ2_S: 32, point l of
// sub-block j at 4 j + l; IQ3_S: 64, point i of sub-block j at 8 j + i), the
// qs byte or'ed with its qh bits: each qh byte spread over its points' words,
// masked to the point's bits and moved to bit 8 by a multiply, 16 words a
// vector, where the scalar decode spends 5 operations a point.
template <QuantType kType>
HWY_INLINE void point_indices(const uint8_t* block, uint16_t* idx) {
    constexpr bool kIq2 = kType == QuantType::IQ2_S;
    constexpr int kPoints = kIq2 ? 32 : 64;
    constexpr int kPerQh = kPoints / 8;  // points sharing a qh byte
    const uint8_t* qs = block + (kIq2 ? offsetof(BlockIQ2_S, qs) : offsetof(BlockIQ3_S, qs));
    const __m128i qh = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(
        block + (kIq2 ? offsetof(BlockIQ2_S, qh) : offsetof(BlockIQ3_S, qh))));
    // Word i of a vector: point p = 16 v + i takes qh byte p / kPerQh, bits
    // (IQ2_S) 2 (p % 4), + 1 or (IQ3_S) p % 8, times 2^(8 - that bit).
    const __m256i bits = kIq2 ? _mm256_set_epi16(192, 48, 12, 3, 192, 48, 12, 3, 192, 48, 12, 3, 192, 48, 12, 3)
                              : _mm256_set_epi16(128, 64, 32, 16, 8, 4, 2, 1, 128, 64, 32, 16, 8, 4, 2, 1);
    const __m256i shift = kIq2 ? _mm256_set_epi16(4, 16, 64, 256, 4, 16, 64, 256, 4, 16, 64, 256, 4, 16, 64, 256)
                               : _mm256_set_epi16(2, 4, 8, 16, 32, 64, 128, 256, 2, 4, 8, 16, 32, 64, 128, 256);
    for (int v = 0; v < kPoints / 16; ++v) {
        alignas(16) uint8_t spread[16];
        for (int i = 0; i < 16; ++i) spread[i] = static_cast<uint8_t>((16 * v + i) / kPerQh);
        const __m128i qh16 = _mm_shuffle_epi8(qh, _mm_load_si128(reinterpret_cast<const __m128i*>(spread)));
        const __m256i high = _mm256_mullo_epi16(_mm256_and_si256(_mm256_cvtepu8_epi16(qh16), bits), shift);
        const __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * v)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16 * v), _mm256_or_si256(low, high));
    }
}

// IQ1's 32 point indices of a block (8 bits from qs, 3 from qh) built in
// vector registers, 8 a vector (sub-blocks 2 v and 2 v + 1), and stored:
// sub-block j's four at 4 j. The scalar work of four indices per sub-block
// (loads, shifts, masks, ors) was most of the kernel. Their table words are
// then loaded one by one and inserted: on AMD Zen 5 that beats one
// vpgatherdq of the four by about a third (tessera bench, tg of the
// TinyLlama-1.1B shape in IQ1_S and IQ1_M, 1 and 2 threads).
template <QuantType kType>
HWY_INLINE void iq1_block_indices(const uint8_t* block, uint32_t* idx) {
    constexpr bool kS = kType == QuantType::IQ1_S;
    const uint8_t* qs = block + (kS ? offsetof(BlockIQ1_S, qs) : offsetof(BlockIQ1_M, qs));
    const uint8_t* qh = block + (kS ? offsetof(BlockIQ1_S, qh) : offsetof(BlockIQ1_M, qh));
    // Point l of sub-block j: its top 3 bits at 3 l (IQ1_S) or 4 l (IQ1_M)
    // of the sub-block's 16-bit qh word; two words a vector, the second at 16.
    const __m256i at = kS ? _mm256_set_epi32(25, 22, 19, 16, 9, 6, 3, 0) : _mm256_set_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    const __m256i seven = _mm256_set1_epi32(7);
    for (int v = 0; v < 4; ++v) {
        uint32_t pair;
        std::memcpy(&pair, qh + 4 * v, 4);  // sub-blocks 2 v, 2 v + 1 (little-endian)
        const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(pair)), at), seven);
        const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * v)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * v), _mm256_or_si256(low, _mm256_slli_epi32(high, 8)));
    }
}

// IQ1's shift signs, a block at a time, as bytes 2 (shift -1/8) or 0 that
// one vpshufb per sub-block spreads over its points' weights (byte spread
// masks below). IQ1_S: a sign per sub-block (bit 15 of its qh word), byte j
// in both 128-bit lanes. IQ1_M: a sign per point (bit 4 l + 3 of its
// sub-block's qh word); points 0 and 1 of sub-block j at bytes 2 j and
// 2 j + 1 of the low lane, points 2 and 3 at the same bytes of the high lane,
// where their weights are.
template <QuantType kType>
HWY_INLINE __m256i iq1_shift_twos(const uint8_t* block) {
    constexpr size_t kQh = kType == QuantType::IQ1_S ? offsetof(BlockIQ1_S, qh) : offsetof(BlockIQ1_M, qh);
    uint64_t lo, hi;
    std::memcpy(&lo, block + kQh, 8);
    std::memcpy(&hi, block + kQh + 8, 8);
    constexpr uint64_t kTwos = 0x0202020202020202ull;
    if constexpr (kType == QuantType::IQ1_S) {
        constexpr uint64_t kSignBits = 0x8000800080008000ull;
        const uint64_t bits = _pext_u64(lo, kSignBits) | (_pext_u64(hi, kSignBits) << 4);
        return _mm256_set1_epi64x(static_cast<int64_t>(_pdep_u64(bits, kTwos)));
    } else {
        constexpr uint64_t kPoints01 = 0x0088008800880088ull, kPoints23 = 0x8800880088008800ull;
        return _mm256_set_epi64x(static_cast<int64_t>(_pdep_u64(_pext_u64(hi, kPoints23), kTwos)),
                                 static_cast<int64_t>(_pdep_u64(_pext_u64(lo, kPoints23), kTwos)),
                                 static_cast<int64_t>(_pdep_u64(_pext_u64(hi, kPoints01), kTwos)),
                                 static_cast<int64_t>(_pdep_u64(_pext_u64(lo, kPoints01), kTwos)));
    }
}
template <QuantType kType>
struct TwoSpreadMasks {
    alignas(32) uint8_t bytes[8][32];
    constexpr TwoSpreadMasks() : bytes() {
        for (int j = 0; j < 8; ++j) {
            for (int i = 0; i < 32; ++i) {
                const int point_in_lane = (i % 16) / 8;
                bytes[j][i] = static_cast<uint8_t>(kType == QuantType::IQ1_S ? j : 2 * j + point_in_lane);
            }
        }
    }
};
template <QuantType kType>
inline constexpr TwoSpreadMasks<kType> kTwoSpreadMasks{};

// IQ1_S / IQ1_M's sub-block j as the other types' operands: each weight
// 8 p + shift (p in -1, 0, 1; shift +-1: never 0) from the table of 8 p + 1
// less 2 where the shift is -1; its magnitude is the unsigned operand, the
// weight itself the sign of the activations; the odd scale of each 16 (IQ1_S:
// 32) from the block's odd_scale_bytes.
template <QuantType kType, bool kIndexed>
HWY_INLINE void iq1_weights(const uint8_t* block, int j, const IqTables& t, __m256i scale_bytes, __m256i twos,
                            [[maybe_unused]] const uint32_t* idx, __m256i* points, __m256i* signs, __m256i* scales) {
    // The 4 point words by the block's indices (one column), or by indices
    // made here from the sub-block's fields (more columns: there this is
    // faster than iq1_block_indices, by about a sixth in prefill); the
    // shift bits as a byte 2 (minus) or 0 per point and the odd scales of
    // each 16 (IQ1_S: 32) from the block's vectors, one shuffle each.
    const uint64_t* table = t.iq1_weights;
    uint32_t four[4];
    if constexpr (kIndexed) {
        std::memcpy(four, idx + 4 * j, sizeof four);
    } else if constexpr (kType == QuantType::IQ1_S) {
        const uint32_t qh = iq_decode::u16_at(block + offsetof(BlockIQ1_S, qh) + 2 * j);
        const uint8_t* qs = block + offsetof(BlockIQ1_S, qs) + 4 * j;
        four[0] = qs[0] | ((qh << 8) & 0x700);
        four[1] = qs[1] | ((qh << 5) & 0x700);
        four[2] = qs[2] | ((qh << 2) & 0x700);
        four[3] = qs[3] | ((qh >> 1) & 0x700);
    } else {
        const uint32_t qh = iq_decode::u16_at(block + offsetof(BlockIQ1_M, qh) + 2 * j);  // point l's nibble at 4 l
        const uint8_t* qs = block + offsetof(BlockIQ1_M, qs) + 4 * j;
        four[0] = qs[0] | ((qh << 8) & 0x700);
        four[1] = qs[1] | ((qh << 4) & 0x700);
        four[2] = qs[2] | (qh & 0x700);
        four[3] = qs[3] | ((qh >> 4) & 0x700);
    }
    __m256i w = _mm256_set_epi64x(static_cast<int64_t>(table[four[3]]), static_cast<int64_t>(table[four[2]]),
                                  static_cast<int64_t>(table[four[1]]), static_cast<int64_t>(table[four[0]]));
    const __m256i two =
        _mm256_shuffle_epi8(twos, _mm256_load_si256(reinterpret_cast<const __m256i*>(kTwoSpreadMasks<kType>.bytes[j])));
    w = _mm256_sub_epi8(w, two);
    *points = _mm256_abs_epi8(w);
    *signs = w;
    *scales = _mm256_shuffle_epi8(scale_bytes,
                                  _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleMasks<kType>.bytes[j])));
}

// sum over the 8 x 32 weights of one row's block of (2 s + 1) point sign y,
// for C columns at once.
template <QuantType kType, class Products, int C>
HWY_INLINE void row_sums(const uint8_t* block, const uint8_t* const* xq, const IqTables& t, int32_t* out) {
    const __m256i plus = _mm256_set1_epi8(1);
    __m256i sum[C];
    for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
    __m256i scale_bytes = _mm256_setzero_si256();
    if constexpr (kScaleBytesOfBlock<kType>) scale_bytes = odd_scale_bytes<kType>(block);
    __m256i iq1_twos = _mm256_setzero_si256();
    if constexpr (kIq1<kType>) iq1_twos = iq1_shift_twos<kType>(block);
    alignas(32) uint16_t idx[kIqHighBits<kType> ? 64 : 1];
    if constexpr (kIqHighBits<kType>) point_indices<kType>(block, idx);
    // One column: IQ1's indices a block at a time.
    constexpr bool kIq1Indexed = kIq1<kType> && C == 1;
    alignas(32) uint32_t iq1_idx[kIq1Indexed ? 32 : 1];
    if constexpr (kIq1Indexed) iq1_block_indices<kType>(block, iq1_idx);
    alignas(32) uint32_t words[8], word_signs[8];
    if constexpr (kIqSignWords<kType>) {
        const __m256i w = sign_words<kType>(block);
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), w);
        _mm256_store_si256(reinterpret_cast<__m256i*>(word_signs), sign_bytes_of_words(w));
    }
    for (int j = 0; j < 8; ++j) {
        __m256i points, signs, scales;
        if constexpr (kIq1<kType>) {
            iq1_weights<kType, kIq1Indexed>(block, j, t, scale_bytes, iq1_twos, iq1_idx, &points, &signs, &scales);
        } else {
        // The sign-word types decode nothing per sub-block but their points,
        // and IQ3_XXS's 8 point words go straight into the vector (vpinsrd
        // from the table), not through 64-bit words in scalar registers.
        IqSub32 s;
        if constexpr (!kIqSignWords<kType>) s = iq_decode32<kType, !kIqSignBytes<kType>, !kIqHighBits<kType>>(block, j, t);
        if constexpr (kType == QuantType::IQ2_XXS) {
            const uint8_t* p = block + offsetof(BlockIQ2_XXS, qs) + 8 * j;
            points = _mm256_set_epi64x(static_cast<int64_t>(t.points8[p[3]]), static_cast<int64_t>(t.points8[p[2]]),
                                       static_cast<int64_t>(t.points8[p[1]]), static_cast<int64_t>(t.points8[p[0]]));
        } else if constexpr (kType == QuantType::IQ2_S) {
            const uint16_t* p = idx + 4 * j;
            points = _mm256_set_epi64x(static_cast<int64_t>(t.points8[p[3]]), static_cast<int64_t>(t.points8[p[2]]),
                                       static_cast<int64_t>(t.points8[p[1]]), static_cast<int64_t>(t.points8[p[0]]));
        } else if constexpr (kType == QuantType::IQ3_XXS) {
            const uint8_t* p = block + offsetof(BlockIQ3_XXS, qs) + 8 * j;
            points = _mm256_set_epi32(
                static_cast<int32_t>(t.points4[p[7]]), static_cast<int32_t>(t.points4[p[6]]),
                static_cast<int32_t>(t.points4[p[5]]), static_cast<int32_t>(t.points4[p[4]]),
                static_cast<int32_t>(t.points4[p[3]]), static_cast<int32_t>(t.points4[p[2]]),
                static_cast<int32_t>(t.points4[p[1]]), static_cast<int32_t>(t.points4[p[0]]));
        } else if constexpr (kType == QuantType::IQ3_S) {
            const uint16_t* p = idx + 8 * j;
            points = _mm256_set_epi32(
                static_cast<int32_t>(t.points4[p[7]]), static_cast<int32_t>(t.points4[p[6]]),
                static_cast<int32_t>(t.points4[p[5]]), static_cast<int32_t>(t.points4[p[4]]),
                static_cast<int32_t>(t.points4[p[3]]), static_cast<int32_t>(t.points4[p[2]]),
                static_cast<int32_t>(t.points4[p[1]]), static_cast<int32_t>(t.points4[p[0]]));
        } else {
            points = _mm256_set_epi64x(static_cast<int64_t>(s.points[3]), static_cast<int64_t>(s.points[2]),
                                       static_cast<int64_t>(s.points[1]), static_cast<int64_t>(s.points[0]));
        }
        // 0xFF | 1 = -1 where the weight is negative, 1 elsewhere.
        __m256i masks;
        if constexpr (kIqSignWords<kType>) {
            masks = sign_byte_masks(reinterpret_cast<const uint8_t*>(word_signs + j));
        } else if constexpr (kIqSignBytes<kType>) {
            masks = sign_byte_masks(iq_sign_bytes<kType>(block, j));
        } else {
            masks = _mm256_set_epi64x(static_cast<int64_t>(s.signs[3]), static_cast<int64_t>(s.signs[2]),
                                      static_cast<int64_t>(s.signs[1]), static_cast<int64_t>(s.signs[0]));
        }
        signs = _mm256_or_si256(masks, plus);
        if constexpr (kIqScaleNibbles<kType>) {
            scales = _mm256_shuffle_epi8(
                scale_bytes, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleMasks<kType>.bytes[j])));
        } else if constexpr (kIqSignWords<kType>) {
            scales = _mm256_set1_epi16(static_cast<int16_t>(2 * (words[j] >> 28) + 1));
        } else {
            scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s.scale_hi)),
                                      _mm_set1_epi16(static_cast<int16_t>(s.scale_lo)));
        }
        }
        for (int c = 0; c < C; ++c) {
            const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[c] + 32 * j));
            const __m256i products = _mm256_maddubs_epi16(points, _mm256_sign_epi8(y, signs));
            sum[c] = Products::add_pairs(sum[c], products, scales);
        }
    }
    for (int c = 0; c < C; ++c) {
        const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum[c]), _mm256_extracti128_si256(sum[c], 1));
        const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        out[c] = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
    }
}

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <QuantType kType, size_t kBlockBytes, class Products, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    const IqTables t = iq_tables(kType);
    const __m256 k = _mm256_set1_ps(kIqStepFactor<kType>);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m256 acc[C][2];
        for (int c = 0; c < C; ++c) {
            for (int h = 0; h < 2; ++h) acc[c][h] = accumulate ? _mm256_loadu_ps(y + c * y_stride + 8 * h) : _mm256_setzero_ps();
        }
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupRows * kBlockBytes;
            const uint8_t* xq[C];
            float dx[C];
            for (int c = 0; c < C; ++c) {
                const uint8_t* xb = x + c * x_stride + b * kQ8KBytes;
                xq[c] = xb + kQ8KQs;
                std::memcpy(&dx[c], xb, 4);
            }
            alignas(32) int32_t s[C][kGroupRows];
            alignas(16) uint16_t d[kGroupRows];
            for (int r = 0; r < kGroupRows; ++r) {
                int32_t row[C];
                row_sums<kType, Products, C>(p + r * kBlockBytes, xq, t, row);
                for (int c = 0; c < C; ++c) s[c][r] = row[c];
                d[r] = iq_block_d_of<kType>(p + r * kBlockBytes);
            }
            for (int h = 0; h < 2; ++h) {
                const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d + 8 * h)));
                for (int c = 0; c < C; ++c) {
                    const __m256 sf = _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s[c] + 8 * h)));
                    acc[c][h] = _mm256_fmadd_ps(_mm256_set1_ps(dx[c]), _mm256_mul_ps(dw, _mm256_mul_ps(k, sf)), acc[c][h]);
                }
            }
        }
        for (int c = 0; c < C; ++c) {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + c * y_stride + 8 * h, acc[c][h]);
        }
    }
}

// QuantTraits::vec_dot_groups of a grid type, the scales applied by
// Products (avx2_products-inl.h; with AVX-VNNI one vpdpwssd).
template <QuantType kType, size_t kBlockBytes, class Products = avx2_products::Maddubs>
inline constexpr VecDotGroupsFn vec_dot_groups =
    q8k_group_entry<group_kernel<kType, kBlockBytes, Products, 1>, group_kernel<kType, kBlockBytes, Products, 2>,
                    group_kernel<kType, kBlockBytes, Products, 3>, group_kernel<kType, kBlockBytes, Products, 4>>;

}  // namespace iq_grid_avx2
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
