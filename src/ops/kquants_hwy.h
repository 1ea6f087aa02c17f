// SIMD kernels for the K-quant types (kquants_hwy.cpp): Q4_K . Q8_K and
// Q6_K . Q8_K dot products with register-tiled vec_dot_tile, and the Q8_K
// activation quantizer. Compiled for several CPU targets with Highway
// (x86: SSE4, AVX2, AVX-512, AVX-512 VNNI; ARM: NEON; everywhere Highway's
// fallback, EMU128 or, with GCC < 12.3, SCALAR), the best one the CPU
// supports chosen at run time. The scalar
// references are the scalar_traits entries of the same types; tests compare
// the two on every compiled target.
#pragma once

#include "ops/quant_traits.h"

namespace tessera {

// The traits of the dispatched target for Q4_K, Q6_K and Q8_K (entries a
// target does not specialize are the scalar references); nullptr for other
// types, or where the type has no scalar reference to start from.
const QuantTraits* kquants_simd_traits(QuantType type);

}  // namespace tessera
