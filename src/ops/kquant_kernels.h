// SIMD dot products for the K-quant weight types (Q4_K, Q6_K against Q8_K
// activations), compiled per CPU target (kquant_hwy.cpp) and chosen at run
// time. Their scalar references live with the block formats in
// kquant_scalar.cpp; tests compare the two on every target.
#pragma once

#include "ops/quant_traits.h"

namespace tessera {

// The traits of the best target for Q4_K / Q6_K (nullptr for other types, or
// when this build has no scalar reference for the type to start from).
const QuantTraits* simd_kquant_traits(QuantType type);

}  // namespace tessera
