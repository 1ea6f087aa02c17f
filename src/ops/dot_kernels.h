// SIMD kernels for the float and 32-element block types (F32, F16, Q8_0,
// Q4_0), compiled for several CPU targets (dot_hwy.cpp, Highway's
// foreach_target) with the best one chosen at run time. The scalar reference
// of every kernel is in quant_scalar.cpp; tests run both on every target.
#pragma once

#include "ops/quant_traits.h"

#include <cstdint>
#include <vector>

namespace tessera {

// The traits table of the best target this CPU supports (or of the target a
// test forced with hwy::SetSupportedTargetsForTest), for F32, F16, Q8_0 and
// Q4_0; nullptr for other types. Entries a target does not specialize are the
// scalar references.
const QuantTraits* simd_block_traits(QuantType type);

// The targets dot_hwy.cpp was compiled for that this CPU supports, best first
// (for tests and benchmarks to force each in turn with
// hwy::SetSupportedTargetsForTest). Other files may compile fewer targets
// (AVX3_DL is opt-in), so their own HWY_TARGETS would miss some.
std::vector<int64_t> simd_block_targets();

}  // namespace tessera
