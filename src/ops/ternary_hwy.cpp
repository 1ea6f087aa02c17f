// The types whose codes stand for q - 1 times a block's scale, on the
// dispatched CPU target (ternary_hwy.h): Q2_0 (q < 4, 64 elements against two
// Q8_0 blocks), TQ2_0 and TQ1_0 (q < 3, 256 elements against one Q8_K
// block). Scalar references for rows; one grouped kernel a type for every
// target.
//
// A row's integer sum is sum(q x) - sum(x), the codes unsigned, so AVX-512
// VNNI's vpdpbusd and AVX2's maddubs take them as they are: a vector of int32
// lanes holds 4 code bytes of each of consecutive rows, and code l of those 4
// bytes (2 bits shifted by 2l; TQ1_0's trit l, (uint8(b * 3^l) * 3) >> 8, decoded
// by byte adds and saturating subtractions) meets 4 activation codes:
//   Q2_0 (q1_0_group_layout.h): elements 4b + l of a 16-element word, so the
//        activations are rearranged once a call (byte b of word l: x[4b + l]);
//   TQ2_0, TQ1_0 (ternary_group_layout.h): 4 consecutive elements, loaded as
//        they are.
// Each block's sum(x) is counted once a call. Integers are exact and the float
// step is the canonical one (q2_0_scalar.h, ternary_scalar.h), fused on every
// target.
//
// The kernels (ternary_groups_kernel.inc) are written once and compiled once
// per way of forming those byte dots: vpdpbusd, maddubs or multiplies as the
// target has them, and, where the CPU has the int8 dot extension
// (int8_dot_extension.h), AVX2 with AVX-VNNI's vpdpbusd, each in its own
// target section; 64-bit NEON with sdot has raw NEON kernels
// (ternary_groups_neon_dotprod-inl.h). Chosen on every product.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/ternary_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/canonical_math-inl.h"
#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/int8_dot_extension.h"
#include "ops/kquant_blocks.h"
#include "ops/q1_0_group_layout.h"
#include "ops/q2_0_scalar.h"
#include "ops/row_groups.h"
#include "ops/ternary_group_layout.h"
#include "ops/ternary_hwy.h"
#include "ops/ternary_scalar.h"
#include "util/fp16.h"

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif
#include "ops/vnni_target.h"

// Included here, inside nothing: the kernels with ARM's dot product.
#include "ops/ternary_groups_neon_dotprod-inl.h"

// The AVX-512 VNNI section compiles for VNNI's EVEX form (vnni_target.h);
// every other target as Highway compiles it.
#undef TESSERA_TERNARY_PUSH
#undef TESSERA_TERNARY_BEGIN
#undef TESSERA_TERNARY_POP
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_TERNARY_PUSH TESSERA_VNNI_PUSH
#define TESSERA_TERNARY_BEGIN TESSERA_VNNI_BEGIN
#define TESSERA_TERNARY_POP TESSERA_VNNI_POP
#else
#define TESSERA_TERNARY_PUSH
#define TESSERA_TERNARY_BEGIN
#define TESSERA_TERNARY_POP
#endif

TESSERA_TERNARY_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_TERNARY_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace ternary_parts {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;


// Code l (< 4) of 2-bit codes: bits 2l of each byte.
HWY_INLINE hn::Vec<DU> bit_pair(hn::Vec<DU> v, int l) {
    return hn::And(hn::ShiftRightSame(v, 2 * l), hn::Set(DU(), 0x03030303u));
}

// TQ1_0's trit l of a byte b is (m * 3) >> 8 with m = uint8(b * 3^l): m
// steps from one trit to the next as m = uint8(3 m), and the trit is
// [m > 85] + [m > 170], so byte adds, saturating subtractions and minima
// decode it: the four 16-bit multiplies a trit of before held the kernel at
// 14 GB/s on Zen 5, these at 17 (stream_bench, 1 thread).
HWY_INLINE hn::Vec<DU> times3_bytes(hn::Vec<DU> m) {
#if HWY_TARGET == HWY_SCALAR
    // One lane: the four bytes one by one.
    const uint32_t word = hn::GetLane(m);
    uint32_t out = 0;
    for (int b = 0; b < 4; ++b) out |= static_cast<uint32_t>(static_cast<uint8_t>(((word >> (8 * b)) & 0xFFu) * 3)) << (8 * b);
    return hn::Set(DU(), out);
#else
    const hn::Repartition<uint8_t, DU> d8;
    const auto b = hn::BitCast(d8, m);
    return hn::BitCast(DU(), hn::Add(hn::Add(b, b), b));
#endif
}

HWY_INLINE hn::Vec<DU> trit_of(hn::Vec<DU> m) {
#if HWY_TARGET == HWY_SCALAR
    const uint32_t word = hn::GetLane(m);
    uint32_t out = 0;
    for (int b = 0; b < 4; ++b) out |= static_cast<uint32_t>((((word >> (8 * b)) & 0xFFu) * 3) >> 8) << (8 * b);
    return hn::Set(DU(), out);
#else
    const hn::Repartition<uint8_t, DU> d8;
    const auto b = hn::BitCast(d8, m);
    const auto one = hn::Set(d8, uint8_t{1});
    const auto over85 = hn::Min(hn::SaturatedSub(b, hn::Set(d8, uint8_t{85})), one);
    const auto over170 = hn::Min(hn::SaturatedSub(b, hn::Set(d8, uint8_t{170})), one);
    return hn::BitCast(DU(), hn::Add(over85, over170));
#endif
}

// The partial sums of a block's chains (see ternary_groups_kernel.inc), in
// one fixed order; integers, so any order gives the same total.
template <int P>
HWY_INLINE hn::Vec<DI> chains_total(const hn::Vec<DI> (&s)[P]) {
    auto total = s[0];
    for (int i = 1; i < P; ++i) total = hn::Add(total, s[i]);
    return total;
}

HWY_INLINE hn::Vec<DU> load_word(const uint8_t* g, int64_t words_at, int k, int r0) {
    return hn::LoadU(DU(), reinterpret_cast<const uint32_t*>(g + words_at + 64 * k + 4 * r0));
}

HWY_INLINE int32_t x_word(const int8_t* x) {
    int32_t w;
    std::memcpy(&w, x, 4);
    return w;
}

// The rows' fp16 scales at the start of a group block.
HWY_INLINE hn::Vec<DF> row_scales(const uint8_t* g, int r0) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(g) + r0));
}

// Per call: each Q8_K activation block's code sum, for every column (a
// thread's run of rows shares it), from the block's 16 partial sums.
inline const int32_t* q8_k_block_sums(const void* x, size_t x_stride, int n_cols, int64_t n_blocks) {
    thread_local std::vector<int32_t> sums;
    sums.resize(static_cast<size_t>(n_cols) * static_cast<size_t>(n_blocks));
    for (int c = 0; c < n_cols; ++c) {
        for (int64_t k = 0; k < n_blocks; ++k) {
            int16_t bsums[kQK_K / 16];
            std::memcpy(bsums, static_cast<const uint8_t*>(x) + c * x_stride + k * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, bsums),
                        sizeof bsums);
            int32_t s = 0;
            for (const int16_t part : bsums) s += part;
            sums[static_cast<size_t>(c * n_blocks + k)] = s;
        }
    }
    return sums.data();
}

// ---- Q2_0 ----

// Column x's Q8_0 blocks rearranged for Q2_0's words: word 4w + l holds
// x[16w + 4b + l] in byte b (w < 2, l < 4), each 16 codes transposed 4 x 4
// by one byte shuffle (a byte loop on the scalar target).
const int32_t* q2_0_shuffled(const void* x, size_t x_stride, int n_cols, int64_t n_blocks) {
    thread_local std::vector<int32_t> words;
    words.resize(static_cast<size_t>(n_cols) * static_cast<size_t>(n_blocks) * 8);
    for (int c = 0; c < n_cols; ++c) {
        for (int64_t k = 0; k < n_blocks; ++k) {
            const uint8_t* qs = static_cast<const uint8_t*>(x) + c * x_stride + k * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
            auto* out = reinterpret_cast<uint8_t*>(words.data() + 8 * static_cast<size_t>(c * n_blocks + k));
#if HWY_TARGET == HWY_SCALAR
            for (int w = 0; w < 2; ++w) {
                for (int l = 0; l < 4; ++l) {
                    for (int b = 0; b < 4; ++b) out[4 * (4 * w + l) + b] = qs[16 * w + 4 * b + l];
                }
            }
#else
            alignas(16) static constexpr uint8_t kTranspose[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
            const hn::Full128<uint8_t> d8;
            const auto transpose = hn::Load(d8, kTranspose);
            for (int w = 0; w < 2; ++w) hn::StoreU(hn::TableLookupBytes(hn::LoadU(d8, qs + 16 * w), transpose), d8, out + 16 * w);
#endif
        }
    }
    return words.data();
}

// Columns a tile takes: each block's codes are decoded once for all of them
// (prefill), each column keeping its own sums.
constexpr int kTileCols = 4;

// The loop of the ternary kernels: each group, its columns in tiles of at
// most kTileCols, the rows in runs of a vector's int32 lanes, each unit of
// blocks from 0 (or from what y holds, with accumulate), the blocks in order:
//   step(block p, first row r0, block b, first column c0, acc)
// adds block b of rows r0.. to acc[c], the float sums of column c0 + c (an
// array of the tile's width). The stream is prefetched once per block.
template <int C, int64_t kBlockBytes, class Step>
HWY_INLINE void run_tile(const uint8_t* group, int64_t nb, int64_t unit_nb, int c0, float* y, size_t y_stride,
                         size_t unit_stride, bool accumulate, Ahead near, const Step& step) {
    const DF df;
    const int lanes = static_cast<int>(hn::Lanes(df));
    for (int r0 = 0; r0 < kGroupRows; r0 += lanes) {
        for (int64_t u0 = 0, u = 0; u0 < nb; u0 += unit_nb, ++u) {
            hn::Vec<DF> acc[C];
            for (int c = 0; c < C; ++c) {
                float* out = y + (c0 + c) * y_stride + r0 + u * unit_stride;
                acc[c] = accumulate ? hn::LoadU(df, out) : hn::Zero(df);
            }
            const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
            for (int64_t b = u0; b < u1; ++b) {
                const uint8_t* p = group + b * kBlockBytes;
                if (c0 == 0 && r0 == 0) prefetch_ahead(p, kBlockBytes, near);
                step(p, r0, b, c0, acc);
            }
            for (int c = 0; c < C; ++c) hn::StoreU(acc[c], df, y + (c0 + c) * y_stride + r0 + u * unit_stride);
        }
    }
}

template <int64_t kBlock, int64_t kBlockBytes, class Step>
HWY_INLINE void run_tiles(int64_t n, const void* w, size_t group_stride, int n_groups, int n_cols, float* y,
                          size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate, Ahead near,
                          const Step& step) {
    const int64_t nb = n / kBlock;
    const int64_t unit_nb = (unit_n > 0 && unit_n < n ? unit_n : n) / kBlock;
    for (int g = 0; g < n_groups; ++g) {
        const uint8_t* group = static_cast<const uint8_t*>(w) + g * group_stride;
        float* yg = y + g * kGroupRows;
        for (int c0 = 0; c0 < n_cols; c0 += kTileCols) {
            switch (n_cols - c0 < kTileCols ? n_cols - c0 : kTileCols) {
                case 1: run_tile<1, kBlockBytes>(group, nb, unit_nb, c0, yg, y_stride, unit_stride, accumulate, near, step); break;
                case 2: run_tile<2, kBlockBytes>(group, nb, unit_nb, c0, yg, y_stride, unit_stride, accumulate, near, step); break;
                case 3: run_tile<3, kBlockBytes>(group, nb, unit_nb, c0, yg, y_stride, unit_stride, accumulate, near, step); break;
                default: run_tile<4, kBlockBytes>(group, nb, unit_nb, c0, yg, y_stride, unit_stride, accumulate, near, step); break;
            }
        }
    }
}

// The width of a tile's accumulator array (the step's acc).
template <class Acc>
inline constexpr int kWidth = static_cast<int>(std::extent_v<std::remove_reference_t<Acc>>);

}  // namespace ternary_parts

// ---- The kernels as the target compiles them ----

namespace ternary_groups {
using namespace ternary_parts;

// acc + per lane sum over its 4 bytes of codes (unsigned, < 64) times the 4
// signed activation bytes of x_word.
HWY_INLINE hn::Vec<DI> add_byte_dots(hn::Vec<DI> acc, hn::Vec<DU> codes, int32_t x_word) {
#if HWY_TARGET == HWY_AVX3_DL
    return hn::Vec<DI>{_mm512_dpbusd_epi32(acc.raw, codes.raw, _mm512_set1_epi32(x_word))};
#elif HWY_TARGET == HWY_AVX3
    const __m512i pairs = _mm512_maddubs_epi16(codes.raw, _mm512_set1_epi32(x_word));
    return hn::Vec<DI>{_mm512_add_epi32(acc.raw, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)))};
#elif HWY_TARGET == HWY_AVX2
    const __m256i pairs = _mm256_maddubs_epi16(codes.raw, _mm256_set1_epi32(x_word));
    return hn::Vec<DI>{_mm256_add_epi32(acc.raw, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))};
#else
    const DI di;
    const DU du;
    int8_t x[4];
    std::memcpy(x, &x_word, 4);
    for (int b = 0; b < 4; ++b) {
        const auto code = hn::BitCast(di, hn::And(hn::ShiftRightSame(codes, 8 * b), hn::Set(du, 0xFFu)));
        acc = hn::Add(acc, hn::Mul(code, hn::Set(di, x[b])));
    }
    return acc;
#endif
}

#include "ops/ternary_groups_kernel.inc"

}  // namespace ternary_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_TERNARY_POP

#if HWY_TARGET == HWY_AVX2
// ---- AVX2 with AVX-VNNI: vpdpbusd in 256 bits ----
TESSERA_AVXVNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_AVXVNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace ternary_avxvnni {
using namespace ternary_parts;

HWY_INLINE hn::Vec<DI> add_byte_dots(hn::Vec<DI> acc, hn::Vec<DU> codes, int32_t x_word) {
    return hn::Vec<DI>{_mm256_dpbusd_avx_epi32(acc.raw, codes.raw, _mm256_set1_epi32(x_word))};
}

#include "ops/ternary_groups_kernel.inc"

}  // namespace ternary_avxvnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_AVXVNNI_POP
#endif


HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {

// A type's kernel, with the int8 dot extension's where the target has one.
#if HWY_TARGET == HWY_AVX2
#define TESSERA_TERNARY_KERNEL(name, dotprod_name) with_int8_dot_extension<ternary_avxvnni::name, ternary_groups::name>
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#define TESSERA_TERNARY_KERNEL(name, dotprod_name) with_int8_dot_extension<dotprod_ternary::dotprod_name, ternary_groups::name>
#else
#define TESSERA_TERNARY_KERNEL(name, dotprod_name) ternary_groups::name
#endif

const QuantTraits* TernaryTraits(QuantType type) {
    static const QuantTraits q2_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::Q2_0);
        t.vec_dot_groups = TESSERA_TERNARY_KERNEL(q2_0_vec_dot_groups, q2_0_vec_dot_groups);
        return t;
    }();
    static const QuantTraits tq2_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::TQ2_0);
        t.vec_dot_groups = TESSERA_TERNARY_KERNEL(ternary_vec_dot_groups<false>, ternary_vec_dot_groups<false>);
        return t;
    }();
    static const QuantTraits tq1_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::TQ1_0);
        t.vec_dot_groups = TESSERA_TERNARY_KERNEL(ternary_vec_dot_groups<true>, ternary_vec_dot_groups<true>);
        return t;
    }();
    switch (type) {
        case QuantType::Q2_0: return &q2_0;
        case QuantType::TQ2_0: return &tq2_0;
        case QuantType::TQ1_0: return &tq1_0;
        default: return nullptr;
    }
}

#undef TESSERA_TERNARY_KERNEL

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(TernaryTraits);

const QuantTraits* ternary_simd_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(TernaryTraits)(type); }
}  // namespace tessera
#endif
