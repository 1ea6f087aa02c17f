// Q4_K weights in the group layout (ops/row_groups.h) against Q8_K
// activations with AVX-VNNI, for the AVX2 target on CPUs that have it
// (ops/int8_dot_extension.h). Included by kquants_hwy.cpp once per target (hence the
// toggling include guard), inside nothing.
//
// The kernel is kquant_groups_avx2-inl.h's (kquant_groups_avx2_kernel.inc)
// with a sub-block's products formed by vpdpbusd straight into int32 lanes
// instead of maddubs into int16 and a madd: the same integers, the same bits.

#if defined(TESSERA_OPS_KQUANT_GROUPS_AVXVNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_KQUANT_GROUPS_AVXVNNI_INL_H_
#undef TESSERA_OPS_KQUANT_GROUPS_AVXVNNI_INL_H_
#else
#define TESSERA_OPS_KQUANT_GROUPS_AVXVNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX2

#include <immintrin.h>

#include "ops/group_tiles.h"
#include "ops/kquant_group_layout.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"
#include "ops/vnni_target.h"

#include <cstdint>
#include <cstring>

TESSERA_AVXVNNI_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_AVXVNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace avxvnni_kgroups {

#define TESSERA_KQ_SUB_ADD(s, w, y) _mm256_dpbusd_avx_epi32((s), (w), (y))
#define TESSERA_KQ_SCALES(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))
#define TESSERA_KQ_SUB_SCALE(s, sc) _mm256_mullo_epi32((s), (sc))
#define TESSERA_KQ_SUB_FIRST(w, y) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (w), (y))
#include "ops/kquant_groups_avx2_kernel.inc"
#undef TESSERA_KQ_SUB_FIRST
#undef TESSERA_KQ_SUB_ADD
#undef TESSERA_KQ_SCALES
#undef TESSERA_KQ_SUB_SCALE

}  // namespace avxvnni_kgroups
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_AVXVNNI_POP

#endif  // HWY_TARGET == HWY_AVX2
#endif  // include guard
