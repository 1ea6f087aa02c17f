// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX2, for the AVX2 and AVX3 (AVX-512 without VNNI)
// targets. Included by kquants_hwy.cpp once per target (hence the toggling
// include guard), inside nothing.
//
// A 256-bit vector takes 8 rows of a chunk's 64-byte line, one row per 32-bit
// lane, so a super-block is two halves of 8 rows. Per chunk h of 64 elements,
// 8 loads per half give each row's low nibbles (sub-block 2h) and high
// nibbles (sub-block 2h + 1); maddubs multiplies them (unsigned, 0..15) by 4
// of the column's activation bytes (signed) broadcast, adding pairs into
// int16: a pair is at most 2 * 15 * 128 = 3840, so a sub-block's 8 chunk
// products add up in int16 (at most 30720), and one madd by the row's 6-bit
// scale (held in both int16 of the row's lane: avx2_products-inl.h's
// scale_pairs) widens and scales them at once; the mins take one madd per pair of sub-blocks (the rows' int16 pairs of mins
// against the column's pair of sub-block sums, from Q8_K's bsums). The float
// step is the canonical one (vec_dot_groups_canonical):
//   block = fma(-dmin_r, float(mins), d_r * float(scaled));  acc = fma(d_x, block, acc)
// so a row's bits equal the AVX-512 VNNI kernel's and every other target's.

#if defined(TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_AVX2_INL_H_
#endif

#include <hwy/highway.h>

// Outside the target test: toggling headers must be seen on every pass.
#include "ops/avx2_products-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace avx2_kgroups {

#define TESSERA_KQ_SUB_ADD(s, w, y) avx2_products::Maddubs::add((s), (w), (y))
#define TESSERA_KQ_SCALES(p) avx2_products::scale_pairs(p)
#define TESSERA_KQ_SUB_SCALE(s, sc) _mm256_madd_epi16((s), (sc))
#define TESSERA_KQ_SUB_FIRST(w, y) _mm256_maddubs_epi16((w), (y))
#include "ops/kquant_groups_avx2_kernel.inc"
#undef TESSERA_KQ_SUB_FIRST
#undef TESSERA_KQ_SUB_ADD
#undef TESSERA_KQ_SCALES
#undef TESSERA_KQ_SUB_SCALE

}  // namespace avx2_kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#endif  // include guard
