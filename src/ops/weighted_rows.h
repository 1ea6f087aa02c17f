// Weighted sums of rows: out_j = sum_r w_j[r] * row_r, for several weight
// sets j at once. Attention's value step for one query position is this (the
// rows are the cached V rows of a head, the sets its query heads' softmax
// scores): reading V in place, row by row, needs no transposed copy of the
// head's history per token. weighted_row_sums runs the best SIMD target of
// this CPU (weighted_rows_hwy.cpp); weighted_row_sums_scalar is its reference.
#pragma once

#include "ops/quant_type.h"

#include <cstddef>
#include <cstdint>

namespace tessera {

// out[j * out_stride + i] = sum over r < n_rows of weights[j * w_stride + r] *
// (element i of the row at rows + r * row_stride bytes), for i < n and
// j < n_sets; rows are F32, F16, Q8_0 or Q4_0 (n a multiple of 32 for the
// block types: a row of n elements is n / 32 whole blocks).
void weighted_row_sums(QuantType type, const void* rows, size_t row_stride, int64_t n_rows, const float* weights,
                       size_t w_stride, int n_sets, int64_t n, float* out, size_t out_stride);
void weighted_row_sums_scalar(QuantType type, const void* rows, size_t row_stride, int64_t n_rows,
                              const float* weights, size_t w_stride, int n_sets, int64_t n, float* out,
                              size_t out_stride);

}  // namespace tessera
