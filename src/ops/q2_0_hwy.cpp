// Q2_0's traits on the dispatched CPU target (q2_0_hwy.h): the scalar
// reference for rows, and one grouped kernel for every target
// (q1_0_group_layout.h: a vector of int32 lanes holds 16 codes of each of
// consecutive rows, element 16k + 4b + j at bits 8b + 2j).
//
// A row's integer sum over a Q8_0 block is sum(q x) - sum(x), q in [0, 4)
// unsigned, so AVX-512 VNNI's vpdpbusd and AVX2's maddubs take the codes as
// they are: shifted by 2j and masked, a word's bytes are the codes of elements
// 4b + j (b < 4), and the activations are rearranged to match once a call (byte
// b of word j: x[4b + j]), with each block's sum counted then too. Integers are
// exact, the float step is the canonical one (q2_0_scalar.h), fused on every
// target.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/q2_0_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/canonical_math-inl.h"
#include "ops/group_prefetch.h"
#include "ops/portable_group_loop-inl.h"
#include "ops/q1_0_group_layout.h"
#include "ops/q2_0_hwy.h"
#include "ops/q2_0_scalar.h"
#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cstring>
#include <vector>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif
#include "ops/vnni_target.h"

// The AVX-512 VNNI section compiles for VNNI's EVEX form (vnni_target.h);
// every other target as Highway compiles it.
#undef TESSERA_Q2_0_PUSH
#undef TESSERA_Q2_0_BEGIN
#undef TESSERA_Q2_0_POP
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_Q2_0_PUSH TESSERA_VNNI_PUSH
#define TESSERA_Q2_0_BEGIN TESSERA_VNNI_BEGIN
#define TESSERA_Q2_0_POP TESSERA_VNNI_POP
#else
#define TESSERA_Q2_0_PUSH
#define TESSERA_Q2_0_BEGIN
#define TESSERA_Q2_0_POP
#endif

TESSERA_Q2_0_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_Q2_0_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace q2_0_groups {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;

// One Q8_0 activation block rearranged for the codes: word 4w + j holds
// x[16w + 4b + j] in byte b (w < 2, j < 4), beside the codes' sum.
struct ShuffledBlock {
    int32_t word[8];
    int32_t sum;
};

// Column x's n_sub Q8_0 blocks, rearranged.
void shuffle_blocks(const uint8_t* x, int64_t n_sub, ShuffledBlock* out) {
    for (int64_t k = 0; k < n_sub; ++k) {
        BlockQ8_0 block;
        std::memcpy(&block, x + k * static_cast<int64_t>(sizeof block), sizeof block);
        ShuffledBlock s{};
        uint8_t bytes[32];
        for (int w = 0; w < 2; ++w) {
            for (int j = 0; j < 4; ++j) {
                for (int b = 0; b < 4; ++b) bytes[4 * (4 * w + j) + b] = static_cast<uint8_t>(block.qs[16 * w + 4 * b + j]);
            }
        }
        std::memcpy(s.word, bytes, sizeof bytes);
        for (int i = 0; i < 32; ++i) s.sum += block.qs[i];
        out[k] = s;
    }
}

// sum (q - 1) x over one Q8_0 block for rows r0..: q the codes of the two
// words at q (group words 2h, 2h + 1), xs the block rearranged.
HWY_INLINE hn::Vec<DI> block_sums(const uint8_t* q, int r0, const ShuffledBlock& xs) {
#if HWY_TARGET == HWY_AVX3_DL
    (void)r0;
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512i acc = _mm512_set1_epi32(-xs.sum);
    for (int w = 0; w < 2; ++w) {
        const __m512i v = _mm512_loadu_si512(q + 64 * w);
        for (int j = 0; j < 4; ++j) {
            const __m512i codes = _mm512_and_si512(_mm512_srli_epi32(v, static_cast<unsigned>(2 * j)), m3);
            acc = _mm512_dpbusd_epi32(acc, codes, _mm512_set1_epi32(xs.word[4 * w + j]));
        }
    }
    return hn::Vec<DI>{acc};
#elif HWY_TARGET == HWY_AVX2
    // maddubs' 16-bit pairs stay within 8 * 2 * 3 * 128 over the eight products.
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i acc16 = _mm256_setzero_si256();
    for (int w = 0; w < 2; ++w) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * w + 4 * r0));
        for (int j = 0; j < 4; ++j) {
            const __m256i codes = _mm256_and_si256(_mm256_srli_epi32(v, 2 * j), m3);
            acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(codes, _mm256_set1_epi32(xs.word[4 * w + j])));
        }
    }
    return hn::Vec<DI>{_mm256_sub_epi32(_mm256_madd_epi16(acc16, _mm256_set1_epi16(1)), _mm256_set1_epi32(xs.sum))};
#else
    const DI di;
    const DU du;
    auto acc = hn::Set(di, -xs.sum);
    for (int w = 0; w < 2; ++w) {
        const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(q + 64 * w + 4 * r0));
        for (int j = 0; j < 4; ++j) {
            const int8_t* xw = reinterpret_cast<const int8_t*>(&xs.word[4 * w + j]);
            for (int b = 0; b < 4; ++b) {
                const auto code = hn::BitCast(di, hn::And(hn::ShiftRightSame(v, 8 * b + 2 * j), hn::Set(du, 3u)));
                acc = hn::Add(acc, hn::Mul(code, hn::Set(di, xw[b])));
            }
        }
    }
    return acc;
#endif
}

// QuantTraits::vec_dot_groups for Q2_0.
void vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y, size_t y_stride,
                    int64_t unit_n, size_t unit_stride, bool accumulate) {
    const int64_t n_sub = n / 32;
    // Rearranged once a call, for every group of it (a thread's run of rows).
    thread_local std::vector<ShuffledBlock> shuffled;
    shuffled.resize(static_cast<size_t>(n_cols) * static_cast<size_t>(n_sub));
    for (int c = 0; c < n_cols; ++c) {
        shuffle_blocks(static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride, n_sub,
                       shuffled.data() + static_cast<size_t>(c) * static_cast<size_t>(n_sub));
    }
    const DF df;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const bool near = near_prefetch(QuantType::Q2_0);
    portable_loop::run<kQ2_0Block, q1_0_group::kBytes, 2 * static_cast<int64_t>(sizeof(BlockQ8_0))>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t* xb, int c, int64_t b, hn::Vec<DF> acc) {
            // The stream ahead, once per block (the first column's first rows).
            if (c == 0 && r0 == 0) prefetch_ahead(p, q1_0_group::kBytes, near);
            const ShuffledBlock* xs = shuffled.data() + static_cast<size_t>(c) * static_cast<size_t>(n_sub) + 2 * b;
            const auto dw = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            for (int h = 0; h < 2; ++h) {
                uint16_t dx;
                std::memcpy(&dx, xb + h * static_cast<int64_t>(sizeof(BlockQ8_0)), 2);
                const auto s = block_sums(p + q1_0_group::kQs + 128 * h, r0, xs[h]);
                acc = canonical::fused_mul_add(df, hn::ConvertTo(df, s), hn::Mul(dw, hn::Set(df, fp16_to_fp32(dx))), acc);
            }
            return acc;
        });
}

}  // namespace q2_0_groups

const QuantTraits* Q2_0Traits(QuantType type) {
    if (type != QuantType::Q2_0) return nullptr;
    static const QuantTraits traits = [] {
        QuantTraits t = *scalar_traits(QuantType::Q2_0);
        t.vec_dot_groups = q2_0_groups::vec_dot_groups;
        return t;
    }();
    return &traits;
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_Q2_0_POP

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(Q2_0Traits);

const QuantTraits* q2_0_simd_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(Q2_0Traits)(type); }
}  // namespace tessera
#endif
