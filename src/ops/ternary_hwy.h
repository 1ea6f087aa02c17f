// Q2_0, TQ2_0 and TQ1_0 (codes q - 1 times a block's scale) on the
// dispatched CPU target: scalar rows, a grouped kernel on every target
// (ternary_hwy.cpp). Every target gives the scalar references' bits.
#pragma once

#include "ops/quant_traits.h"

namespace tessera {

// The traits of Q2_0, TQ2_0 or TQ1_0; nullptr for any other type.
const QuantTraits* ternary_simd_traits(QuantType type);

}  // namespace tessera
