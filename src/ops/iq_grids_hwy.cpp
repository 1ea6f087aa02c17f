// The grid I-quants' traits on the dispatched CPU target (iq_grids_hwy.h):
// the scalar references for rows, the grouped kernels of
// iq_grid_groups_vnni-inl.h (AVX-512 with VNNI and VBMI: permute lookups),
// iq_grid_groups_avx2-inl.h (x86 AVX2, AVX-512 without VNNI),
// iq_grid_groups_neon_dotprod-inl.h (64-bit NEON with the dot product) or
// iq_grid_groups_hwy-inl.h (every other target). Same targets as
// kquants_hwy.cpp.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/iq_grids_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/iq_grid_blocks.h"
#include "ops/iq_grid_groups_avx2-inl.h"
#include "ops/iq_grid_groups_hwy-inl.h"
#include "ops/iq_grid_groups_neon_dotprod-inl.h"
#include "ops/iq_grid_groups_vnni-inl.h"
#include "ops/iq_grids_hwy.h"

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {

template <QuantType kType, size_t kBlockBytes>
const QuantTraits* grid_traits() {
    static const QuantTraits traits = [] {
        QuantTraits t = *scalar_traits(kType);
#if HWY_TARGET == HWY_AVX3_DL
        t.vec_dot_groups = iq_grid_vnni::vec_dot_groups<kType, kBlockBytes>;
#elif HWY_TARGET == HWY_AVX2
        // With AVX-VNNI where the CPU has it and it is allowed.
        t.vec_dot_groups = with_int8_dot_extension<iq_grid_avx2::vec_dot_groups<kType, kBlockBytes, avx2_products::AvxVnni>,
                                                   iq_grid_avx2::vec_dot_groups<kType, kBlockBytes>>;
#elif HWY_TARGET == HWY_AVX3
        t.vec_dot_groups = iq_grid_avx2::vec_dot_groups<kType, kBlockBytes>;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
        // With the dot-product extension where the CPU has it and it is allowed.
        t.vec_dot_groups = with_int8_dot_extension<dotprod_iq_grid::vec_dot_groups<kType, kBlockBytes>,
                                                   portable_iq_grid::vec_dot_groups<kType, kBlockBytes>>;
#else
        t.vec_dot_groups = portable_iq_grid::vec_dot_groups<kType, kBlockBytes>;
#endif
        return t;
    }();
    return &traits;
}

const QuantTraits* IqGridTraits(QuantType type) {
    switch (type) {
        case QuantType::IQ2_XXS: return grid_traits<QuantType::IQ2_XXS, sizeof(BlockIQ2_XXS)>();
        case QuantType::IQ2_XS: return grid_traits<QuantType::IQ2_XS, sizeof(BlockIQ2_XS)>();
        case QuantType::IQ2_S: return grid_traits<QuantType::IQ2_S, sizeof(BlockIQ2_S)>();
        case QuantType::IQ3_XXS: return grid_traits<QuantType::IQ3_XXS, sizeof(BlockIQ3_XXS)>();
        case QuantType::IQ3_S: return grid_traits<QuantType::IQ3_S, sizeof(BlockIQ3_S)>();
        case QuantType::IQ1_S: return grid_traits<QuantType::IQ1_S, sizeof(BlockIQ1_S)>();
        case QuantType::IQ1_M: return grid_traits<QuantType::IQ1_M, sizeof(BlockIQ1_M)>();
        default: return nullptr;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(IqGridTraits);

const QuantTraits* iq_grid_simd_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(IqGridTraits)(type); }
}  // namespace tessera
#endif
