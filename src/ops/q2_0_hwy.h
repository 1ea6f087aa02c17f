// Q2_0 on the dispatched CPU target: scalar rows, a grouped kernel on every
// target (q2_0_hwy.cpp). Every target gives the scalar reference's bits.
#pragma once

#include "ops/quant_traits.h"

namespace tessera {

// Its traits; nullptr for any other type.
const QuantTraits* q2_0_simd_traits(QuantType type);

}  // namespace tessera
