// Q1_0's traits on the dispatched CPU target (q1_0_hwy.h): the scalar
// reference for rows, and one grouped kernel in portable Highway ops for
// every target (q1_0_group_layout.h: a vector of int32 lanes holds 32 signs
// of each of consecutive rows).
//
// A row's integer sum over a Q8_0 block is sum(x where the bit is set) * 2 -
// sum(x). The activations are cut into bit planes first (plane p: bit p of
// each of the block's 32 codes, two's complement, so code = sum over p < 7 of
// 2^p bit_p - 128 bit_7), after which the set-bit sum of every row at once is
//   sum over p of weight_p * popcount(signs AND plane_p)
// eight ANDs and population counts for 32 weights of every row in the vector
// instead of 32 multiply-adds (on AVX-512 VNNI: population counts of 16-bit
// halves, whose pairs vpdpwssd weighs and adds, three instructions a plane;
// on AVX2, which has no per-lane count, byte counts by nibble lookups weighed
// by maddubs).
// On x86 the planes come from byte shifts and movemask. Integers are exact,
// the float step is the canonical one (q1_0_scalar.h), fused on every target.
// (One column streams at ~0.65 of the read ceiling on Zen 5: bound by these
// 24 instructions per 512 signs, not by memory.)
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/q1_0_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/canonical_math-inl.h"
#include "ops/portable_group_loop-inl.h"
#include "ops/q1_0_group_layout.h"
#include "ops/q1_0_hwy.h"
#include "ops/q1_0_scalar.h"
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
#undef TESSERA_Q1_0_PUSH
#undef TESSERA_Q1_0_BEGIN
#undef TESSERA_Q1_0_POP
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_Q1_0_PUSH TESSERA_VNNI_PUSH
#define TESSERA_Q1_0_BEGIN TESSERA_VNNI_BEGIN
#define TESSERA_Q1_0_POP TESSERA_VNNI_POP
#else
#define TESSERA_Q1_0_PUSH
#define TESSERA_Q1_0_BEGIN
#define TESSERA_Q1_0_POP
#endif

TESSERA_Q1_0_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_Q1_0_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace q1_0_groups {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;

// One Q8_0 activation block as bit planes, its codes' sum and its scale.
struct PlanedBlock {
    uint32_t plane[8];
    int32_t sum;
    float dx;
};

// Column x's n_sub Q8_0 blocks as planes.
void plane_blocks(const uint8_t* x, int64_t n_sub, PlanedBlock* out) {
    for (int64_t j = 0; j < n_sub; ++j) {
        BlockQ8_0 block;
        std::memcpy(&block, x + j * static_cast<int64_t>(sizeof block), sizeof block);
        PlanedBlock planed{};
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
        // Bit p of each byte to its top (a 16-bit shift moves no bit across
        // a byte's top), then the bytes' tops as a word.
        const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
        for (int p = 0; p < 8; ++p) {
            const __m256i top = _mm256_sll_epi16(codes, _mm_cvtsi32_si128(7 - p));
            planed.plane[p] = static_cast<uint32_t>(_mm256_movemask_epi8(top));
        }
        for (int i = 0; i < 32; ++i) planed.sum += block.qs[i];
#else
        for (int i = 0; i < 32; ++i) {
            const auto code = static_cast<uint8_t>(block.qs[i]);
            planed.sum += block.qs[i];
            for (int p = 0; p < 8; ++p) planed.plane[p] |= static_cast<uint32_t>((code >> p) & 1u) << i;
        }
#endif
        planed.dx = fp16_to_fp32(block.d);
        out[j] = planed;
    }
}

// 2 * sum(x where the sign bit is set) - sum(x): every row's integer sum of
// one Q8_0 block, rows r0.. in the lanes.
HWY_INLINE hn::Vec<DI> signed_sum(hn::Vec<DU> signs, const PlanedBlock& xb) {
    const DI di;
    const DU du;
#if HWY_TARGET == HWY_AVX3_DL
    // Population counts of 16-bit halves (BITALG) multiplied by the planes'
    // weights, doubled, and added in pairs into the sum (VNNI's vpdpwssd):
    // three instructions a plane.
    // Two chains of four (vpdpwssd's latency, not its throughput, bounds one chain of eight).
    __m512i even = _mm512_set1_epi32(-xb.sum), odd = _mm512_setzero_si512();
    for (int q = 0; q < 8; q += 2) {
        const __m512i c0 = _mm512_popcnt_epi16(_mm512_and_si512(signs.raw, _mm512_set1_epi32(static_cast<int32_t>(xb.plane[q]))));
        const __m512i c1 = _mm512_popcnt_epi16(_mm512_and_si512(signs.raw, _mm512_set1_epi32(static_cast<int32_t>(xb.plane[q + 1]))));
        even = _mm512_dpwssd_epi32(even, c0, _mm512_set1_epi16(static_cast<int16_t>(2 << q)));
        odd = _mm512_dpwssd_epi32(odd, c1, _mm512_set1_epi16(static_cast<int16_t>(q + 1 < 7 ? 4 << q : -256)));
    }
    (void)di;
    (void)du;
    return hn::Vec<DI>{_mm512_add_epi32(even, odd)};
#elif HWY_TARGET == HWY_AVX2
    // No population count per lane on AVX2 (Highway's takes ~12 instructions
    // a 32-bit lane): each byte's count by two nibble lookups, weighed by
    // maddubs into 16-bit pairs (at most 16 * 255 in magnitude over the eight
    // planes), then the pairs added into the lanes.
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i counts_of = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,  //
                                               0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    __m256i pairs = _mm256_setzero_si256();
    for (int q = 0; q < 8; ++q) {
        const __m256i set = _mm256_and_si256(signs.raw, _mm256_set1_epi32(static_cast<int32_t>(xb.plane[q])));
        const __m256i counts =
            _mm256_add_epi8(_mm256_shuffle_epi8(counts_of, _mm256_and_si256(set, nibble)),
                            _mm256_shuffle_epi8(counts_of, _mm256_and_si256(_mm256_srli_epi16(set, 4), nibble)));
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(counts, _mm256_set1_epi8(static_cast<int8_t>(q < 7 ? 1 << q : -128))));
    }
    const __m256i set_sum = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    (void)di;
    (void)du;
    return hn::Vec<DI>{_mm256_sub_epi32(_mm256_add_epi32(set_sum, set_sum), _mm256_set1_epi32(xb.sum))};
#else
    auto low = hn::Zero(du);
    for (int q = 0; q < 7; ++q) {
        low = hn::Add(low, hn::ShiftLeftSame(hn::PopulationCount(hn::And(signs, hn::Set(du, xb.plane[q]))), q));
    }
    const auto top = hn::ShiftLeft<7>(hn::PopulationCount(hn::And(signs, hn::Set(du, xb.plane[7]))));
    const auto set_sum = hn::Sub(hn::BitCast(di, low), hn::BitCast(di, top));
    return hn::Sub(hn::Add(set_sum, set_sum), hn::Set(di, xb.sum));
#endif
}

// QuantTraits::vec_dot_groups for Q1_0.
void vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                    const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y, size_t y_stride,
                    int64_t unit_n, size_t unit_stride, bool accumulate) {
    const int64_t n_sub = n / 32;
    // Planed once a call, for every group of it (a thread's run of rows).
    thread_local std::vector<PlanedBlock> planes;
    planes.resize(static_cast<size_t>(n_cols) * static_cast<size_t>(n_sub));
    for (int c = 0; c < n_cols; ++c) {
        plane_blocks(static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride, n_sub,
                     planes.data() + static_cast<size_t>(c) * static_cast<size_t>(n_sub));
    }
    const DF df;
    const DU du;
    const hn::Rebind<hwy::float16_t, DF> dh;
    portable_loop::run<kQ1_0Block, q1_0_group::kBytes, 4 * static_cast<int64_t>(sizeof(BlockQ8_0))>(
        n, w, group_stride, n_groups, x, x_stride, n_cols, y, y_stride, unit_n, unit_stride, accumulate,
        [&](const uint8_t* p, int r0, const uint8_t*, int c, int64_t b, hn::Vec<DF> acc) {
            const PlanedBlock* xb = planes.data() + static_cast<size_t>(c) * static_cast<size_t>(n_sub) + 4 * b;
            const auto dw = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + r0));
            for (int k = 0; k < 4; ++k) {
                const auto signs = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p + q1_0_group::kQs + 64 * k + 4 * r0));
                const auto s = signed_sum(signs, xb[k]);
                acc = canonical::fused_mul_add(df, hn::ConvertTo(df, s), hn::Mul(dw, hn::Set(df, xb[k].dx)), acc);
            }
            return acc;
        });
}

}  // namespace q1_0_groups

const QuantTraits* Q1_0Traits(QuantType type) {
    if (type != QuantType::Q1_0) return nullptr;
    static const QuantTraits traits = [] {
        QuantTraits t = *scalar_traits(QuantType::Q1_0);
        t.vec_dot_groups = q1_0_groups::vec_dot_groups;
        return t;
    }();
    return &traits;
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_Q1_0_POP

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(Q1_0Traits);

const QuantTraits* q1_0_simd_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(Q1_0Traits)(type); }
}  // namespace tessera
#endif
