// Quantizing with an importance matrix (llama-quantize --imatrix): per type,
// llama.cpp's quantizer given one value per column of how much that column's
// weights matter (the mean square of the activations they multiply).
#pragma once

#include "ops/quant_type.h"

#include <cstdint>

namespace tessera {

// One row of n floats into `type`, weighted by importance[0, n) (nullptr:
// the type's plain quantizer). Types whose llama.cpp quantizer ignores the
// importance (Q8_0, MXFP4, NVFP4, Q1_0, Q2_0, TQ1_0, TQ2_0, the float types) quantize as without it.
void quantize_row_with_importance(QuantType type, const float* src, void* dst, int64_t n, const float* importance);

}  // namespace tessera
