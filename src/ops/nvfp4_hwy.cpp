// NVFP4's traits on the dispatched CPU target (nvfp4_hwy.h): the scalar
// reference for rows, and one grouped kernel for every target
// (nvfp4_group_layout.h: each 32-element half of a block in MXFP4's code
// order, its low nibbles one 16-element sub-block, its high nibbles the next).
//
// The codes are looked up in E2M1's doubled values plus 12 (unsigned, so that
// AVX-512 VNNI's vpdpbusd and AVX2's maddubs take them against the signed
// activations); 12 times each sub-block's activation sum, counted once a
// call, is taken off after. The two sub-blocks of a half keep separate
// integer sums, each weighed by its own UE4M3 scale, converted in registers
// (the bytes shifted into a float's exponent and mantissa; the 7 subnormal
// codes through an int conversion; 0x7F to 0). Integers are exact and the
// float step is the canonical one (nvfp4_scalar.h), fused on every target.
//
// The kernel (nvfp4_groups_kernel.inc) is compiled once per way of forming
// the integer sums: vpdpbusd, maddubs or multiplies as the target has them,
// and, where the CPU has the int8 dot extension (int8_dot_extension.h), AVX2
// with AVX-VNNI's vpdpbusd in its own target section, and 64-bit NEON with
// sdot in raw NEON (nvfp4_groups_neon_dotprod-inl.h); chosen on every product.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/nvfp4_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/block32_group_layout.h"
#include "ops/canonical_math-inl.h"
#include "ops/group_prefetch.h"
#include "ops/group_tiles.h"
#include "ops/nvfp4_group_layout.h"
#include "ops/nvfp4_hwy.h"
#include "ops/nvfp4_scalar.h"
#include "ops/portable_group_loop-inl.h"
#include "ops/row_groups.h"
#include "util/fp16.h"

#include <cstring>
#include <vector>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif
#include "ops/vnni_target.h"

// Included here, inside nothing: the kernel with ARM's dot product.
#include "ops/nvfp4_groups_neon_dotprod-inl.h"

// The AVX-512 VNNI section compiles for VNNI's EVEX form (vnni_target.h);
// every other target as Highway compiles it.
#undef TESSERA_NVFP4_PUSH
#undef TESSERA_NVFP4_BEGIN
#undef TESSERA_NVFP4_POP
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_NVFP4_PUSH TESSERA_VNNI_PUSH
#define TESSERA_NVFP4_BEGIN TESSERA_VNNI_BEGIN
#define TESSERA_NVFP4_POP TESSERA_VNNI_POP
#else
#define TESSERA_NVFP4_PUSH
#define TESSERA_NVFP4_BEGIN
#define TESSERA_NVFP4_POP
#endif

TESSERA_NVFP4_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_NVFP4_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace nvfp4_parts {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::CappedTag<int32_t, kGroupRows>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::Rebind<float, DI>;

constexpr int32_t kOffset = 12;  // block32_group::kMxfp4Plus12

// UE4M3 scale bytes of the lanes' rows as floats (ue4m3_half_to_float).
HWY_INLINE hn::Vec<DF> scales_of(const uint8_t* bytes) {
    const DI di;
    const DF df;
    const hn::Rebind<uint8_t, DI> d8;
    const auto b = hn::And(hn::BitCast(di, hn::PromoteTo(DU(), hn::LoadU(d8, bytes))), hn::Set(di, 0x7F));
    // Exponent e >= 1: the bytes under a float's exponent, rebiased by 119.
    const auto normal = hn::BitCast(df, hn::Add(hn::ShiftLeft<20>(b), hn::Set(di, 119 << 23)));
    // e = 0: man * 2^-10 (exact).
    const auto tiny = hn::Mul(hn::ConvertTo(df, hn::And(b, hn::Set(di, 7))), hn::Set(df, 0x1p-10f));
    const auto value = hn::IfThenElse(hn::RebindMask(df, hn::Lt(b, hn::Set(di, 8))), tiny, normal);
    return hn::IfThenZeroElse(hn::RebindMask(df, hn::Eq(b, hn::Set(di, 0x7F))), value);
}

// The integer sums of one half (32 elements) of rows r0.. against one Q8_0
// block's codes xq: the low nibbles' (sub-block 2h) and the high nibbles'
// (2h + 1), codes offset by 12, the offsets taken off with the activations'
// sub-block sums.
struct HalfSums {
    hn::Vec<DI> lo, hi;
};

// The activations' sums per 16 codes, counted once a call for every group
// of it (a thread's run of rows).
inline const int32_t* activation_sub_sums(const void* x, size_t x_stride, int n_cols, int64_t n_sub) {
    thread_local std::vector<int32_t> sub_sums;
    sub_sums.resize(static_cast<size_t>(n_cols) * static_cast<size_t>(n_sub));
    for (int c = 0; c < n_cols; ++c) {
        const auto* xc = static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride;
        int32_t* out = sub_sums.data() + static_cast<size_t>(c) * static_cast<size_t>(n_sub);
        for (int64_t j = 0; j < n_sub; ++j) {
            const auto* codes = reinterpret_cast<const int8_t*>(xc + (j / 2) * static_cast<int64_t>(sizeof(BlockQ8_0)) + 2 + 16 * (j % 2));
            int32_t s = 0;
            for (int i = 0; i < 16; ++i) s += codes[i];
            out[j] = s;
        }
    }
    return sub_sums.data();
}

}  // namespace nvfp4_parts

// ---- The kernel as the target compiles it ----

namespace nvfp4_groups {
using namespace nvfp4_parts;

HWY_INLINE HalfSums half_sums(const uint8_t* q, int r0, const int8_t* xq, int32_t x_lo, int32_t x_hi) {
    const DI di;
#if HWY_TARGET == HWY_AVX3_DL
    (void)r0;
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block32_group::kMxfp4Plus12)));
    __m512i lo = _mm512_set1_epi32(-kOffset * x_lo), hi = _mm512_set1_epi32(-kOffset * x_hi);
    for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        const __m512i w_lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, nib));
        const __m512i w_hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
        int32_t y_lo, y_hi;
        std::memcpy(&y_lo, xq + 4 * k, 4);
        std::memcpy(&y_hi, xq + 16 + 4 * k, 4);
        lo = _mm512_dpbusd_epi32(lo, w_lo, _mm512_set1_epi32(y_lo));
        hi = _mm512_dpbusd_epi32(hi, w_hi, _mm512_set1_epi32(y_hi));
    }
    return {hn::Vec<DI>{lo}, hn::Vec<DI>{hi}};
#elif HWY_TARGET == HWY_AVX2
    // maddubs' 16-bit pairs stay within 4 * 2 * 24 * 128 over the four vectors.
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block32_group::kMxfp4Plus12)));
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k + 4 * r0));
        const __m256i w_lo = _mm256_shuffle_epi8(grid, _mm256_and_si256(v, nib));
        const __m256i w_hi = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(v, 4), nib));
        int32_t y_lo, y_hi;
        std::memcpy(&y_lo, xq + 4 * k, 4);
        std::memcpy(&y_hi, xq + 16 + 4 * k, 4);
        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(w_lo, _mm256_set1_epi32(y_lo)));
        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(w_hi, _mm256_set1_epi32(y_hi)));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    return {hn::Vec<DI>{_mm256_sub_epi32(_mm256_madd_epi16(lo, ones), _mm256_set1_epi32(kOffset * x_lo))},
            hn::Vec<DI>{_mm256_sub_epi32(_mm256_madd_epi16(hi, ones), _mm256_set1_epi32(kOffset * x_hi))}};
#else
    const DU du;
    auto lo = hn::Set(di, -kOffset * x_lo), hi = hn::Set(di, -kOffset * x_hi);
    for (int k = 0; k < 4; ++k) {
        const auto v = hn::LoadU(du, reinterpret_cast<const uint32_t*>(q + 64 * k + 4 * r0));
        hn::Vec<DU> w_lo, w_hi;  // byte i: the code (+ 12) of element 4k + i, of 16 + 4k + i
#if HWY_TARGET == HWY_SCALAR
        const uint32_t word = hn::GetLane(v);
        uint32_t a = 0, c = 0;
        for (int i = 0; i < 4; ++i) {
            a |= static_cast<uint32_t>(block32_group::kMxfp4Plus12[(word >> (8 * i)) & 0xF]) << (8 * i);
            c |= static_cast<uint32_t>(block32_group::kMxfp4Plus12[(word >> (8 * i + 4)) & 0xF]) << (8 * i);
        }
        w_lo = hn::Set(du, a);
        w_hi = hn::Set(du, c);
#else
        const hn::Repartition<uint8_t, DU> d8;
        const auto table = hn::LoadDup128(d8, block32_group::kMxfp4Plus12);
        const auto nib = hn::Set(d8, uint8_t{0x0F});
        w_lo = hn::BitCast(du, hn::TableLookupBytes(table, hn::And(hn::BitCast(d8, v), nib)));
        w_hi = hn::BitCast(du, hn::TableLookupBytes(table, hn::And(hn::BitCast(d8, hn::ShiftRight<4>(v)), nib)));
#endif
        for (int i = 0; i < 4; ++i) {
            const auto a = hn::BitCast(di, hn::And(hn::ShiftRightSame(w_lo, 8 * i), hn::Set(du, 0xFFu)));
            const auto c = hn::BitCast(di, hn::And(hn::ShiftRightSame(w_hi, 8 * i), hn::Set(du, 0xFFu)));
            lo = hn::Add(lo, hn::Mul(a, hn::Set(di, xq[4 * k + i])));
            hi = hn::Add(hi, hn::Mul(c, hn::Set(di, xq[16 + 4 * k + i])));
        }
    }
    return {lo, hi};
#endif
}

#include "ops/nvfp4_groups_kernel.inc"

}  // namespace nvfp4_groups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_NVFP4_POP

#if HWY_TARGET == HWY_AVX2
// ---- AVX2 with AVX-VNNI: vpdpbusd straight into int32 lanes ----
TESSERA_AVXVNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_AVXVNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace nvfp4_avxvnni {
using namespace nvfp4_parts;

HWY_INLINE HalfSums half_sums(const uint8_t* q, int r0, const int8_t* xq, int32_t x_lo, int32_t x_hi) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block32_group::kMxfp4Plus12)));
    __m256i lo = _mm256_set1_epi32(-kOffset * x_lo), hi = _mm256_set1_epi32(-kOffset * x_hi);
    for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k + 4 * r0));
        int32_t y_lo, y_hi;
        std::memcpy(&y_lo, xq + 4 * k, 4);
        std::memcpy(&y_hi, xq + 16 + 4 * k, 4);
        lo = _mm256_dpbusd_avx_epi32(lo, _mm256_shuffle_epi8(grid, _mm256_and_si256(v, nib)), _mm256_set1_epi32(y_lo));
        hi = _mm256_dpbusd_avx_epi32(hi, _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(v, 4), nib)),
                                     _mm256_set1_epi32(y_hi));
    }
    return {hn::Vec<DI>{lo}, hn::Vec<DI>{hi}};
}

#include "ops/nvfp4_groups_kernel.inc"

}  // namespace nvfp4_avxvnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_AVXVNNI_POP
#endif


HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {

const QuantTraits* Nvfp4Traits(QuantType type) {
    if (type != QuantType::NVFP4) return nullptr;
    static const QuantTraits traits = [] {
        QuantTraits t = *scalar_traits(QuantType::NVFP4);
#if HWY_TARGET == HWY_AVX2
        t.vec_dot_groups = with_int8_dot_extension<nvfp4_avxvnni::vec_dot_groups, nvfp4_groups::vec_dot_groups>;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
        t.vec_dot_groups = with_int8_dot_extension<dotprod_nvfp4::vec_dot_groups, nvfp4_groups::vec_dot_groups>;
#else
        t.vec_dot_groups = nvfp4_groups::vec_dot_groups;
#endif
        return t;
    }();
    return &traits;
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(Nvfp4Traits);

const QuantTraits* nvfp4_simd_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(Nvfp4Traits)(type); }
}  // namespace tessera
#endif
