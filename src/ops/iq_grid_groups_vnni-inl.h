// The grid I-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
// in the group layout (16 rows' GGUF blocks back to back) against Q8_K
// activations with AVX-512 (target AVX3_DL: VNNI, VBMI, VPOPCNTDQ). The
// point set lives in registers as packed level codes (16 bits a point:
// llama.cpp's kgrid), a super-block's 32 or 64 indices looked up at once by
// two-register word permutes (no gathers: they bound the first version;
// IQ2_S's 1,024 and IQ1's 2,048 codes as byte tables of their low and high
// bytes, two rows' 64 indices at once by byte permutes), each code spread
// to its level bytes by a multishift and a byte permute. IQ1's weights are
// 8 p + shift + 9 (unsigned, signs in the points), each sum started at -9
// times its activations' sum. The 32 groups of 8
// weights then go 8 at a time, one per sub-block of 32 (group l of every
// sub-block in one vector), the 8 sign bytes (their parity bit looked up
// 64 at once where the format keeps 7) spread into one 64-bit mask that
// negates the activations, dpbusd of the unsigned level bytes with them,
// the odd sub-block scales multiplied per lane. The activations are
// rearranged once per block and column into the same order (word 4 j + l
// to lane j of vector l). Exact integers per row, each row's 16 lanes
// folded with three others' and the 16 rows' sums gathered into one
// vector, then the canonical step acc = fma(d_x, d_w * (k * float(S)), acc)
// for 16 rows a vector.
// Included by iq_grids_hwy.cpp once per target (hence the toggling guard).

#if defined(TESSERA_OPS_IQ_GRID_GROUPS_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_IQ_GRID_GROUPS_VNNI_INL_H_
#undef TESSERA_OPS_IQ_GRID_GROUPS_VNNI_INL_H_
#else
#define TESSERA_OPS_IQ_GRID_GROUPS_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/iq_grid_blocks.h"
#include "ops/iq_grid_decode.h"
#include "ops/kquant_group_layout.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace iq_grid_vnni {

// One row's super-block as the kernel reads it: for each l (0..3) the point
// bytes of group l of every sub-block (lane j: sub-block j), the signs as a
// byte mask (bit 8 j + i: weight 32 j + 8 l + i is negative), and the odd
// scales of weights [0, 16) and [16, 32) of each sub-block (both dwords of
// lane j).
struct Decoded {
    __m512i points[4];
    __mmask64 signs[4];
    __m512i scale_lo, scale_hi;
};

HWY_INLINE __m512i lanes_u32(const uint8_t* p) {  // 8 uint32 -> 8 uint64 lanes
    return _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
HWY_INLINE __m512i lanes_u8(const uint8_t* p) {  // 8 bytes -> 8 uint64 lanes
    return _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
// The 128 bytes k | parity(k) << 7: 7 sign bits completed to an even
// number of minus signs, looked up 64 at once by one two-register permute.
alignas(64) inline constexpr auto kEvenSigns = [] {
    std::array<uint8_t, 128> t{};
    for (int k = 0; k < 128; ++k) t[static_cast<size_t>(k)] = static_cast<uint8_t>(k | (__builtin_popcount(k) & 1) << 7);
    return t;
}();
// Byte 8 j + i of vector l: the sign byte of group l of sub-block j, which
// sits at byte kStride j + l of a block's sign bytes.
template <int kStride>
struct SignSpread {
    alignas(64) uint8_t index[4][64];
    constexpr SignSpread() : index() {
        for (int l = 0; l < 4; ++l) {
            for (int b = 0; b < 64; ++b) index[l][b] = static_cast<uint8_t>(kStride * (b / 8) + l);
        }
    }
};
template <int kStride>
inline constexpr SignSpread<kStride> kSignSpread{};
// A block's 32 sign bytes (group l of sub-block j at byte kStride j + l) as
// the 4 byte masks of Decoded.signs: each byte spread over its group's 8
// bytes and tested against its own bit, two instructions a mask (the
// per-lane shifts, narrowing and moves through a general register they
// replace were a third of IQ2_XXS's decoding).
template <int kStride>
HWY_INLINE void sign_masks(__m512i bytes, __mmask64* signs) {
    const __m512i bit = _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201ull));
    for (int l = 0; l < 4; ++l) {
        const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(kSignSpread<kStride>.index[l]), bytes);
        signs[l] = _mm512_test_epi8_mask(spread, bit);
    }
}
// The 7-bit sign fields at bit offsets (byte l of `offsets`: group l's) of
// every 64-bit lane j, completed with their parity, at byte 8 j + l.
HWY_INLINE __m512i even_sign_bytes(__m512i v, uint64_t offsets) {
    const __m512i fields = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(static_cast<int64_t>(offsets)), v),
                                            _mm512_set1_epi8(0x7F));
    return _mm512_permutex2var_epi8(_mm512_load_si512(kEvenSigns.data()), fields, _mm512_load_si512(kEvenSigns.data() + 64));
}
// 2 s + 1 in both dwords of each lane.
HWY_INLINE __m512i odd_scales(__m512i s) {
    const __m512i odd = _mm512_add_epi64(_mm512_slli_epi64(s, 1), _mm512_set1_epi64(1));
    return _mm512_or_si512(odd, _mm512_slli_epi64(odd, 32));
}
// A point set held in registers as its packed level codes (32 a vector):
// 32 indices looked up at once, 64 entries per two-register permute.
template <int kEntries>
struct CodeTable {
    __m512i t[kEntries / 32];
    explicit CodeTable(const uint16_t* codes) {
        for (int i = 0; i < kEntries / 32; ++i) t[i] = _mm512_loadu_si512(codes + 32 * i);
    }
    // Each 64-entry chunk's permute, then a tree of blends on the index's
    // bits 6, 7, ... (one mask per bit, not one compare per chunk).
    HWY_INLINE __m512i lookup(__m512i idx) const {
        constexpr int kChunks = kEntries / 64;
        __m512i r[kChunks];
        for (int c = 0; c < kChunks; ++c) r[c] = _mm512_permutex2var_epi16(t[2 * c], idx, t[2 * c + 1]);
        for (int bit = 0, n = kChunks; n > 1; ++bit, n /= 2) {
            const __mmask32 m = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(static_cast<int16_t>(64 << bit)));
            for (int c = 0; c < n / 2; ++c) r[c] = _mm512_mask_mov_epi16(r[2 * c], m, r[2 * c + 1]);
        }
        return r[0];
    }
};

// A point set of kEntries 16-bit codes (IQ2_S: its 1,024 level codes; IQ1:
// its 2,048 points as p + 1 in 2 bits each) split into byte tables of their
// low and high bytes, read from memory (IQ1's would take 64 registers, and
// IQ2_S's 32 crowded everything else out): two rows' 64 indices looked up
// at once, 128 entries a vpermi2b, then a tree of blends on index bits 7,
// 8, ... (the word tables take 32 indices and 64 entries a permute; IQ2_S's
// word lookup was about 35 of a row's ~85 instructions).
template <int kEntries>
struct ByteCodeTable {
    static constexpr int kChunks = kEntries / 128;
    static constexpr int kHighBits = kEntries == 2048 ? 3 : 2;  // index bits above the byte
    struct Bytes {
        alignas(64) uint8_t lo[kEntries], hi[kEntries];
    };
    static_assert(kEntries == 1024 || kEntries == 2048, "IQ2_S's or IQ1's points");
    const Bytes* bytes;
    // The size names the point set (IQ1_S and IQ1_M share theirs), so one
    // table per size holds it.
    ByteCodeTable() {
        static const Bytes table = [] {
            Bytes b{};
            for (int i = 0; i < kEntries; ++i) {
                const uint16_t code = kEntries == 1024 ? iq2_s_code(i) : iq1_code(i);
                b.lo[i] = static_cast<uint8_t>(code);
                b.hi[i] = static_cast<uint8_t>(code >> 8);
            }
            return b;
        }();
        bytes = &table;
    }
    static uint16_t iq2_s_code(int i) {
        int n = 0;
        return iq_point_codes(QuantType::IQ2_S, &n)[i];
    }
    static uint16_t iq1_code(int i) {
        const uint64_t point = iq1_points()[i];
        uint32_t code = 0;
        for (int e = 0; e < 8; ++e) code |= static_cast<uint32_t>(static_cast<int8_t>((point >> (8 * e)) & 0xFF) + 1) << (2 * e);
        return static_cast<uint16_t>(code);
    }
    // Byte k of idx: bits 0..7 of index k; high[b]: its bit 8 + b.
    HWY_INLINE void lookup(__m512i idx, const __mmask64 (&high)[kHighBits], __m512i& lo_out, __m512i& hi_out) const {
        __m512i l[kChunks], h[kChunks];
        for (int c = 0; c < kChunks; ++c) {
            l[c] = _mm512_permutex2var_epi8(_mm512_load_si512(bytes->lo + 128 * c), idx, _mm512_load_si512(bytes->lo + 128 * c + 64));
            h[c] = _mm512_permutex2var_epi8(_mm512_load_si512(bytes->hi + 128 * c), idx, _mm512_load_si512(bytes->hi + 128 * c + 64));
        }
        for (int bit = 0, n = kChunks; n > 1; ++bit, n /= 2) {
            const __mmask64 m = bit == 0 ? _mm512_movepi8_mask(idx) : high[bit - 1];
            for (int c = 0; c < n / 2; ++c) {
                l[c] = _mm512_mask_mov_epi8(l[2 * c], m, l[2 * c + 1]);
                h[c] = _mm512_mask_mov_epi8(h[2 * c], m, h[2 * c + 1]);
            }
        }
        lo_out = l[0];
        hi_out = h[0];
    }
};

template <QuantType kType>
inline constexpr int kPointCount = kType == QuantType::IQ2_S ? 1024
                                 : kType == QuantType::IQ2_XS || kType == QuantType::IQ3_S ? 512 : 256;

// A level table as 64 bytes: byte x holds level x % 4 (IQ2) or x % 8
// (IQ3), so a byte permute takes a field with whatever lies above it.
template <QuantType kType>
struct LevelBytes {
    alignas(64) uint8_t b[64];
    constexpr LevelBytes() : b() {
        constexpr uint8_t kIq3Xxs[8] = {4, 12, 20, 28, 36, 44, 52, 62}, kIq3S[8] = {1, 3, 5, 7, 9, 11, 13, 15};
        constexpr uint8_t kIq2[4] = {8, 25, 43, 0};
        for (int x = 0; x < 64; ++x) {
            b[x] = kType == QuantType::IQ3_XXS ? kIq3Xxs[x % 8] : kType == QuantType::IQ3_S ? kIq3S[x % 8]
                 : kIq1<kType>                 ? static_cast<uint8_t>(8 * (x % 4))  // IQ1: 8 (p + 1), p in -1, 0, 1
                                               : kIq2[x % 4];
        }
    }
};
template <QuantType kType>
inline constexpr LevelBytes<kType> kLevelBytes{};

// 8 lanes of codes (one IQ2 point of 8 x 2 bits, or two IQ3 points of
// 4 x 3 bits at bits 0 and 16; above them anything) as 8 level bytes each:
// each byte's field moved to its low bits by a multishift, then looked up.
template <QuantType kType>
HWY_INLINE __m512i level_bytes(__m512i lanes) {
    constexpr bool kIq3 = kType == QuantType::IQ3_XXS || kType == QuantType::IQ3_S;
    // Each byte's bit offset in its lane: IQ3 levels at 0, 3, 6, 9 and 16, 19, 22, 25; IQ2 every 2 bits.
    const __m512i offsets = _mm512_set1_epi64(kIq3 ? 0x1916131009060300LL : 0x0E0C0A0806040200LL);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(offsets, lanes), _mm512_load_si512(kLevelBytes<kType>.b));
}

// Word 4 j of vector l: word 8 l + j (codes in l-major order), or word
// 4 j + l (in the block's order); the other words anything.
template <bool kBlockOrder>
struct Iq2Spread {
    alignas(64) uint16_t index[4][32];
    constexpr Iq2Spread() : index() {
        for (int l = 0; l < 4; ++l) {
            for (int w = 0; w < 32; ++w) index[l][w] = static_cast<uint16_t>(kBlockOrder ? 4 * (w / 4) + l : 8 * l + w / 4);
        }
    }
};
template <bool kBlockOrder>
inline constexpr Iq2Spread<kBlockOrder> kIq2Spread{};

// IQ2: 32 codes (16-bit lane 8 l + j, or 4 j + l with kBlockOrder) to the
// 4 vectors of Decoded.points, one word permute each.
template <QuantType kType, bool kBlockOrder = false>
HWY_INLINE void iq2_points_from(__m512i codes, __m512i* points) {
    for (int l = 0; l < 4; ++l) {
        points[l] = level_bytes<kType>(_mm512_permutexvar_epi16(_mm512_load_si512(kIq2Spread<kBlockOrder>.index[l]), codes));
    }
}

// IQ3: the codes of points 0..31 (a) and 32..63 (b) in their order (point
// 8 j + 2 l + e) to the 4 vectors of Decoded.points: lane j of vector l
// holds points 8 j + 2 l and 8 j + 2 l + 1, dword 4 j + l of a:b, in its
// low dword.
template <QuantType kType>
HWY_INLINE void iq3_points_from(__m512i a, __m512i b, __m512i* points) {
    for (int l = 0; l < 4; ++l) {
        const __m512i idx = _mm512_setr_epi32(l, l, 4 + l, 4 + l, 8 + l, 8 + l, 12 + l, 12 + l, 16 + l, 16 + l, 20 + l,
                                              20 + l, 24 + l, 24 + l, 28 + l, 28 + l);
        points[l] = level_bytes<kType>(_mm512_permutex2var_epi32(a, idx, b));
    }
}

// Byte 8 j + l (or 4 j + l) of a vector to 16-bit lane 8 l + j (the
// index of group l of sub-block j in l-major order; high bytes zero).
alignas(64) inline constexpr uint8_t kStride8ToLMajor[64] = {
    0, 0, 8, 0, 16, 0, 24, 0, 32, 0, 40, 0, 48, 0, 56, 0, 1, 0, 9, 0, 17, 0, 25, 0, 33, 0, 41, 0, 49, 0, 57, 0,
    2, 0, 10, 0, 18, 0, 26, 0, 34, 0, 42, 0, 50, 0, 58, 0, 3, 0, 11, 0, 19, 0, 27, 0, 35, 0, 43, 0, 51, 0, 59, 0};
// 16-bit lane 8 l + j <- 16-bit lane 4 j + l.
alignas(64) inline constexpr uint16_t kWordsToLMajor[32] = {0, 4, 8,  12, 16, 20, 24, 28, 1, 5, 9,  13, 17, 21, 25, 29,
                                                            2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31};
// The low byte of every 16-bit lane.
constexpr uint64_t kLowBytes = 0x5555555555555555ULL;
// IQ3_S: byte p / 8 (qh of point p's sub-block) to the high byte of lane p
// (points 0..31, then 32..63), and p % 8 per lane.
alignas(64) inline constexpr uint8_t kHighByteOfPoint[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
    0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3,
    0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5,
    0, 6, 0, 6, 0, 6, 0, 6, 0, 6, 0, 6, 0, 6, 0, 6, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7};
alignas(64) inline constexpr uint16_t kPointBit[32] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,
                                                       0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};

// IQ2_S's signs and odd scales of one block.
HWY_INLINE void iq2_s_signs_and_scales(const uint8_t* block, Decoded& d) {
    sign_masks<4>(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + offsetof(BlockIQ2_S, qs) + kQK_K / 8))),
                  d.signs);
    const __m512i sc = lanes_u8(block + offsetof(BlockIQ2_S, scales));
    d.scale_lo = odd_scales(_mm512_and_si512(sc, _mm512_set1_epi64(15)));
    d.scale_hi = odd_scales(_mm512_srli_epi64(sc, 4));
}

// IQ2_S pairs: byte k < 32 of the qh spread is row a's qh[k / 4], byte
// 32 + k row b's; index k's bits 8 and 9 are bits 2 (k % 4) and 2 (k % 4) + 1
// of it; a row's codes interleaved from the looked-up low and high bytes.
struct Iq2sPairConstants {
    alignas(64) uint8_t spread[64], bit8[64], bit9[64], codes_a[64], codes_b[64];
    constexpr Iq2sPairConstants() : spread(), bit8(), bit9(), codes_a(), codes_b() {
        for (int k = 0; k < 64; ++k) {
            spread[k] = static_cast<uint8_t>(k < 32 ? k / 4 : 8 + (k - 32) / 4);
            bit8[k] = static_cast<uint8_t>(1 << (2 * (k % 4)));
            bit9[k] = static_cast<uint8_t>(2 << (2 * (k % 4)));
            codes_a[k] = static_cast<uint8_t>(k % 2 == 0 ? k / 2 : 64 + k / 2);
            codes_b[k] = static_cast<uint8_t>(k % 2 == 0 ? 32 + k / 2 : 96 + k / 2);
        }
    }
};
inline constexpr Iq2sPairConstants kIq2sPair{};

// Two IQ2_S blocks decoded at once: their 64 indices looked up together.
HWY_INLINE void decode_iq2_s_pair(const uint8_t* a, const uint8_t* b, const ByteCodeTable<1024>& table, Decoded (&w)[2]) {
    // Byte 4 j + l: index (j, l)'s low 8 bits, row a's then row b's.
    const __m512i idx = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + offsetof(BlockIQ2_S, qs)))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(BlockIQ2_S, qs))), 1);
    const __m128i qh = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + offsetof(BlockIQ2_S, qh))),
                                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(BlockIQ2_S, qh))));
    const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(kIq2sPair.spread), _mm512_castsi128_si512(qh));
    __m512i lo, hi;
    const __mmask64 high[2] = {_mm512_test_epi8_mask(spread, _mm512_load_si512(kIq2sPair.bit8)),
                               _mm512_test_epi8_mask(spread, _mm512_load_si512(kIq2sPair.bit9))};
    table.lookup(idx, high, lo, hi);
    iq2_points_from<QuantType::IQ2_S, true>(_mm512_permutex2var_epi8(lo, _mm512_load_si512(kIq2sPair.codes_a), hi), w[0].points);
    iq2_points_from<QuantType::IQ2_S, true>(_mm512_permutex2var_epi8(lo, _mm512_load_si512(kIq2sPair.codes_b), hi), w[1].points);
    iq2_s_signs_and_scales(a, w[0]);
    iq2_s_signs_and_scales(b, w[1]);
}

// Per-byte constants of an IQ1 pair's 64 indices (k < 32: row a's index
// k = 4 j + l, k >= 32 row b's): where each index's top bits and each
// group's shift sign sit in the two rows' qh bytes (row a's 16, then row
// b's at 16; IQ1_S: 8 uint16 a row, IQ1_M: 16 bytes), and which bit.
template <QuantType kType>
struct Iq1PairConstants {
    alignas(64) uint8_t top_byte[3][64], top_bit[3][64];
    alignas(64) uint8_t shift_byte[4][64], shift_bit[4][64];  // vector l's byte 8 j + i, one row (add 16 for row b)
    alignas(64) uint8_t codes_a[64], codes_b[64];
    constexpr Iq1PairConstants() : top_byte(), top_bit(), shift_byte(), shift_bit(), codes_a(), codes_b() {
        constexpr bool kS = kType == QuantType::IQ1_S;
        for (int k = 0; k < 64; ++k) {
            const int row = k / 32, j = (k % 32) / 4, l = k % 4;
            for (int b = 0; b < 3; ++b) {
                // IQ1_S: bit 3 l + b of qh word j; IQ1_M: bit 4 (l % 2) + b of qh byte 2 j + l / 2.
                const int word_bit = 3 * l + b;
                top_byte[b][k] = static_cast<uint8_t>(16 * row + (kS ? 2 * j + word_bit / 8 : 2 * j + l / 2));
                top_bit[b][k] = static_cast<uint8_t>(1 << (kS ? word_bit % 8 : 4 * (l % 2) + b));
            }
            codes_a[k] = static_cast<uint8_t>(k % 2 == 0 ? k / 2 : 64 + k / 2);
            codes_b[k] = static_cast<uint8_t>(k % 2 == 0 ? 32 + k / 2 : 96 + k / 2);
        }
        for (int l = 0; l < 4; ++l) {
            for (int k = 0; k < 64; ++k) {
                const int j = k / 8;
                // IQ1_S: bit 15 of qh word j (bit 7 of byte 2 j + 1); IQ1_M: bit 4 (l % 2) + 3 of byte 2 j + l / 2.
                shift_byte[l][k] = static_cast<uint8_t>(kS ? 2 * j + 1 : 2 * j + l / 2);
                shift_bit[l][k] = static_cast<uint8_t>(kS ? 0x80 : 1 << (4 * (l % 2) + 3));
            }
        }
    }
};
template <QuantType kType>
inline constexpr Iq1PairConstants<kType> kIq1Pair{};

// One IQ1 block's points from its 32 codes (block order), each weight
// 8 p + shift + 9 (8 (p + 1), plus 2 where the shift is +1), and its odd
// scales; its signs are in the weights (none to apply).
template <QuantType kType>
HWY_INLINE void iq1_rest(const uint8_t* block, __m512i codes, __m512i qh, int row, Decoded& d) {
    constexpr bool kS = kType == QuantType::IQ1_S;
    const __m512i two = _mm512_set1_epi8(2);
    const __m512i row_offset = _mm512_set1_epi8(static_cast<char>(16 * row));
    for (int l = 0; l < 4; ++l) {
        const __m512i points = level_bytes<kType>(_mm512_permutexvar_epi16(_mm512_load_si512(kIq2Spread<true>.index[l]), codes));
        const __m512i spread = _mm512_permutexvar_epi8(
            _mm512_add_epi8(_mm512_load_si512(kIq1Pair<kType>.shift_byte[l]), row_offset), qh);
        const __mmask64 minus = _mm512_test_epi8_mask(spread, _mm512_load_si512(kIq1Pair<kType>.shift_bit[l]));
        d.points[l] = _mm512_mask_add_epi8(points, ~minus, points, two);
        d.signs[l] = 0;
    }
    if constexpr (kS) {
        // Sub-block j's scale: bits 12..14 of its qh word.
        const __m512i words = _mm512_cvtepu16_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + offsetof(BlockIQ1_S, qh))));
        d.scale_lo = d.scale_hi = odd_scales(_mm512_and_si512(_mm512_srli_epi64(words, 12), _mm512_set1_epi64(7)));
    } else {
        // Sub-block j's two scales: bits 6 (j % 2) .. + 5 of scale word j / 2.
        const __m128i scales = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + offsetof(BlockIQ1_M, scales)));
        const __m128i pairs = _mm_shuffle_epi8(scales, _mm_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7));
        const __m512i fields = _mm512_srlv_epi64(_mm512_cvtepu16_epi64(pairs), _mm512_setr_epi64(0, 6, 0, 6, 0, 6, 0, 6));
        d.scale_lo = odd_scales(_mm512_and_si512(fields, _mm512_set1_epi64(7)));
        d.scale_hi = odd_scales(_mm512_and_si512(_mm512_srli_epi64(fields, 3), _mm512_set1_epi64(7)));
    }
}

// Two IQ1 blocks decoded at once: their 64 indices looked up together.
template <QuantType kType>
HWY_INLINE void decode_iq1_pair(const uint8_t* a, const uint8_t* b, const ByteCodeTable<2048>& table, Decoded (&w)[2]) {
    constexpr size_t kQs = kType == QuantType::IQ1_S ? offsetof(BlockIQ1_S, qs) : offsetof(BlockIQ1_M, qs);
    constexpr size_t kQh = kType == QuantType::IQ1_S ? offsetof(BlockIQ1_S, qh) : offsetof(BlockIQ1_M, qh);
    const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + kQs))),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQs)), 1);
    // Both rows' 16 qh bytes.
    const __m512i qh = _mm512_castsi256_si512(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + kQh))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQh)), 1));
    __mmask64 high[3];
    for (int bit = 0; bit < 3; ++bit) {
        high[bit] = _mm512_test_epi8_mask(_mm512_permutexvar_epi8(_mm512_load_si512(kIq1Pair<kType>.top_byte[bit]), qh),
                                          _mm512_load_si512(kIq1Pair<kType>.top_bit[bit]));
    }
    __m512i lo, hi;
    table.lookup(idx, high, lo, hi);
    iq1_rest<kType>(a, _mm512_permutex2var_epi8(lo, _mm512_load_si512(kIq1Pair<kType>.codes_a), hi), qh, 0, w[0]);
    iq1_rest<kType>(b, _mm512_permutex2var_epi8(lo, _mm512_load_si512(kIq1Pair<kType>.codes_b), hi), qh, 1, w[1]);
}

template <QuantType kType, typename Table>
HWY_INLINE Decoded decode(const uint8_t* block, const Table& table) {
    Decoded d;
    if constexpr (kType == QuantType::IQ2_XXS) {
        // Lane j: sub-block j's 4 index bytes, then its 4 x 7 sign bits and scale.
        const __m512i v = _mm512_loadu_si512(block + offsetof(BlockIQ2_XXS, qs));
        const __m512i idx = _mm512_maskz_permutexvar_epi8(kLowBytes, _mm512_load_si512(kStride8ToLMajor), v);
        iq2_points_from<kType>(table.lookup(idx), d.points);
        sign_masks<8>(even_sign_bytes(v, 0x352E2720), d.signs);  // group l's 7 bits at 32 + 7 l
        d.scale_lo = d.scale_hi = odd_scales(_mm512_srli_epi64(v, 60));
    } else if constexpr (kType == QuantType::IQ2_XS) {
        // Lane j: sub-block j's 4 uint16 (9-bit index, 7 sign bits).
        const __m512i v = _mm512_loadu_si512(block + offsetof(BlockIQ2_XS, qs));
        const __m512i idx = _mm512_and_si512(_mm512_permutexvar_epi16(_mm512_load_si512(kWordsToLMajor), v),
                                             _mm512_set1_epi16(511));
        iq2_points_from<kType>(table.lookup(idx), d.points);
        sign_masks<8>(even_sign_bytes(v, 0x39291909), d.signs);  // group l's 7 bits at 16 l + 9
        const __m512i sc = lanes_u8(block + offsetof(BlockIQ2_XS, scales));
        d.scale_lo = odd_scales(_mm512_and_si512(sc, _mm512_set1_epi64(15)));
        d.scale_hi = odd_scales(_mm512_srli_epi64(sc, 4));
    } else if constexpr (kType == QuantType::IQ3_XXS) {
        const uint8_t* qs = block + offsetof(BlockIQ3_XXS, qs);
        const __m512i a = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
        const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32)));
        iq3_points_from<kType>(table.lookup(a), table.lookup(b), d.points);
        const __m512i aux = lanes_u32(qs + kQK_K / 4);
        sign_masks<8>(even_sign_bytes(aux, 0x150E0700), d.signs);  // group l's 7 bits at 7 l
        d.scale_lo = d.scale_hi = odd_scales(_mm512_srli_epi64(aux, 28));
    } else {
        static_assert(kType == QuantType::IQ3_S, "a grid I-quant");
        // Point p's index: qs[p] and bit p % 8 of qh[p / 8] above it.
        const uint8_t* qs = block + offsetof(BlockIQ3_S, qs);
        // qh[p / 8] to the high byte of lane p, shifted right by p % 8: bit p % 8 at bit 8.
        const __m512i qh = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + offsetof(BlockIQ3_S, qh))));
        const __m512i shifts = _mm512_load_si512(kPointBit);
        const __m512i bit8 = _mm512_set1_epi16(0x100);
        const __m512i high_a = _mm512_and_si512(
            _mm512_srlv_epi16(_mm512_maskz_permutexvar_epi8(~kLowBytes, _mm512_load_si512(kHighByteOfPoint), qh), shifts), bit8);
        const __m512i high_b = _mm512_and_si512(
            _mm512_srlv_epi16(_mm512_maskz_permutexvar_epi8(~kLowBytes, _mm512_load_si512(kHighByteOfPoint + 64), qh), shifts), bit8);
        const __m512i a = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs))), high_a);
        const __m512i b = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32))), high_b);
        iq3_points_from<kType>(table.lookup(a), table.lookup(b), d.points);
        sign_masks<4>(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + offsetof(BlockIQ3_S, signs)))),
                      d.signs);
        // Nibble j % 2 of scales[j / 2] to lane j.
        int32_t scales;
        std::memcpy(&scales, block + offsetof(BlockIQ3_S, scales), 4);
        const __m128i pairs = _mm_shuffle_epi8(_mm_cvtsi32_si128(scales), _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1));
        const __m512i nibbles = _mm512_srlv_epi64(_mm512_cvtepu8_epi64(pairs), _mm512_setr_epi64(0, 4, 0, 4, 0, 4, 0, 4));
        d.scale_lo = d.scale_hi = odd_scales(_mm512_and_si512(nibbles, _mm512_set1_epi64(15)));
    }
    return d;
}

// An activation block's 256 codes as 4 vectors: lane j of vector l holds
// codes 32 j + 8 l .. + 7 (the order of Decoded).
HWY_INLINE void arrange(const uint8_t* qs, __m512i* y) {
    const __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
    const __m512i q2 = _mm512_loadu_si512(qs + 128), q3 = _mm512_loadu_si512(qs + 192);
    for (int l = 0; l < 4; ++l) {
        const __m512i idx = _mm512_setr_epi64(l, 4 + l, 8 + l, 12 + l, l, 4 + l, 8 + l, 12 + l);
        const __m512i low = _mm512_permutex2var_epi64(q0, idx, q1);   // sub-blocks 0..3
        const __m512i high = _mm512_permutex2var_epi64(q2, idx, q3);  // sub-blocks 4..7
        y[l] = _mm512_mask_blend_epi64(0xF0, low, high);
    }
}

// Four rows' vectors of 16 partial sums (rows 4q + i) folded into one:
// 128-bit quarter i holds row 4q + i's sum in 4 lanes.
HWY_INLINE __m512i fold_quad(const __m512i (&v)[4]) {
    // 256-bit halves: a pair's rows in halves 0 and 1, 8 lanes each.
    const __m512i p01 = _mm512_add_epi32(_mm512_shuffle_i64x2(v[0], v[1], 0x44), _mm512_shuffle_i64x2(v[0], v[1], 0xEE));
    const __m512i p23 = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2], v[3], 0x44), _mm512_shuffle_i64x2(v[2], v[3], 0xEE));
    // Quarters 0, 2 of each pair against 1, 3.
    return _mm512_add_epi32(_mm512_shuffle_i32x4(p01, p23, 0x88), _mm512_shuffle_i32x4(p01, p23, 0xDD));
}

// The 16 rows' sums, lane r row r's, from the four folded quads (quad q:
// rows 4q..4q + 3). The integers are exact: their order is free.
HWY_INLINE __m512i row_sums(const __m512i (&quad)[4]) {
    // Quarter k: rows k, 4 + k in lanes (0, 1), (2, 3); then rows 8 + k, 12 + k.
    const __m512i lo = _mm512_add_epi32(_mm512_unpacklo_epi64(quad[0], quad[1]), _mm512_unpackhi_epi64(quad[0], quad[1]));
    const __m512i hi = _mm512_add_epi32(_mm512_unpacklo_epi64(quad[2], quad[3]), _mm512_unpackhi_epi64(quad[2], quad[3]));
    // Quarter k: rows k, 8 + k, 4 + k, 12 + k.
    const __m512i t0 = _mm512_unpacklo_epi32(lo, hi), t1 = _mm512_unpackhi_epi32(lo, hi);
    const __m512i sums = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    // Row r's lane: 4 (r % 4) + {0, 2, 1, 3}[r / 4].
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
    return _mm512_permutexvar_epi32(order, sums);
}

template <QuantType kType, size_t kBlockBytes, int C>
void group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                  const int32_t* /*sums*/, size_t /*sums_stride*/, float* y, size_t y_stride, size_t unit_stride,
                  bool accumulate) {
    using q4k_group::kQ8KBytes;
    using q4k_group::kQ8KQs;
    using Table = std::conditional_t<kType == QuantType::IQ2_S, ByteCodeTable<1024>,
                                     std::conditional_t<kIq1<kType>, ByteCodeTable<2048>, CodeTable<kPointCount<kType>>>>;
    const Table table = [] {
        if constexpr (kType == QuantType::IQ2_S || kIq1<kType>) {
            return Table();
        } else {
            int n_codes = 0;
            return CodeTable<kPointCount<kType>>(iq_point_codes(kType, &n_codes));
        }
    }();
    const __m512 k = _mm512_set1_ps(kIqStepFactor<kType>);
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupRows * kBlockBytes;
            __m512i ys[C][4];
            float dx[C];
            // IQ1: each sum starts at -9 times its activations' sum (the
            // weights are 8 p + shift + 9; Q8_K's bsums are per 16, the
            // halves lo and hi of a sub-block, in its lane's first dword).
            __m512i start_lo[C], start_hi[C];
            for (int c = 0; c < C; ++c) {
                const uint8_t* xb = x + c * x_stride + b * kQ8KBytes;
                arrange(xb + kQ8KQs, ys[c]);
                std::memcpy(&dx[c], xb, 4);
                start_lo[c] = start_hi[c] = zero;
                if constexpr (kIq1<kType>) {
                    const __m512i sums = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q4k_group::kQ8KBsums)));
                    const __m512i minus9 = _mm512_set1_epi32(-9);
                    start_lo[c] = _mm512_maskz_mullo_epi32(0x5555, sums, minus9);
                    start_hi[c] = _mm512_mullo_epi32(_mm512_srli_epi64(sums, 32), minus9);
                }
            }
            // Each row's 16 lanes of partial sums folded four rows at a time
            // (row_sums), not one horizontal sum per row.
            __m512i quad[C][4];
            alignas(32) uint16_t d[kGroupRows];
            for (int q = 0; q < 4; ++q) {
                __m512i rows[C][4];
                for (int i = 0; i < 4; i += 2) {
                    const uint8_t* block = p + (4 * q + i) * kBlockBytes;
                    Decoded two[2];
                    if constexpr (kType == QuantType::IQ2_S) {
                        decode_iq2_s_pair(block, block + kBlockBytes, table, two);
                    } else if constexpr (kIq1<kType>) {
                        decode_iq1_pair<kType>(block, block + kBlockBytes, table, two);
                    } else {
                        two[0] = decode<kType>(block, table);
                        two[1] = decode<kType>(block + kBlockBytes, table);
                    }
                    for (int e = 0; e < 2; ++e) {
                        const Decoded& w = two[e];
                        for (int c = 0; c < C; ++c) {
                            __m512i lo = start_lo[c], hi = start_hi[c];
                            for (int l = 0; l < 4; ++l) {
                                // IQ1's weights carry their signs.
                                const __m512i yl = kIq1<kType> ? ys[c][l] : _mm512_mask_sub_epi8(ys[c][l], w.signs[l], zero, ys[c][l]);
                                if (l < 2) lo = _mm512_dpbusd_epi32(lo, w.points[l], yl);
                                else hi = _mm512_dpbusd_epi32(hi, w.points[l], yl);
                            }
                            rows[c][i + e] = _mm512_add_epi32(_mm512_mullo_epi32(lo, w.scale_lo), _mm512_mullo_epi32(hi, w.scale_hi));
                        }
                        d[4 * q + i + e] = iq_block_d_of<kType>(block + e * kBlockBytes);
                    }
                }
                for (int c = 0; c < C; ++c) quad[c][q] = fold_quad(rows[c]);
            }
            const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
            for (int c = 0; c < C; ++c) {
                const __m512 sf = _mm512_cvtepi32_ps(row_sums(quad[c]));
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx[c]), _mm512_mul_ps(dw, _mm512_mul_ps(k, sf)), acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
    }
}

// QuantTraits::vec_dot_groups of a grid type.
template <QuantType kType, size_t kBlockBytes>
inline constexpr VecDotGroupsFn vec_dot_groups =
    q8k_group_entry<group_kernel<kType, kBlockBytes, 1>, group_kernel<kType, kBlockBytes, 2>,
                    group_kernel<kType, kBlockBytes, 3>, group_kernel<kType, kBlockBytes, 4>>;

}  // namespace iq_grid_vnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
