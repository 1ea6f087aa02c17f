// The grid I-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) on the
// dispatched CPU target: scalar rows, grouped kernels per target
// (iq_grids_hwy.cpp). Every target gives the scalar reference's bits.
#pragma once

#include "ops/quant_traits.h"

namespace tessera {

// Their traits; nullptr for any other type.
const QuantTraits* iq_grid_simd_traits(QuantType type);

}  // namespace tessera
