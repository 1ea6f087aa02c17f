// The per-type traits table: how to turn a row of a type into floats and back,
// and how to take its dot product with an activation vector. Dispatch happens
// once per tensor (look the traits up, keep the pointer), never per element.
//
// `vec_dot_type` is the type an activation is converted to before a dot
// product with a row of this type: Q8_0 for the block-quantized types (so the
// inner loop is integer), F32 for the float types.
#pragma once

#include "ops/quant_type.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

struct QuantTraits {
    QuantType type;
    QuantType vec_dot_type;
    // Converts n elements (n a multiple of the block size) to float.
    void (*to_float)(const void* src, float* dst, int64_t n);
    // Quantizes n floats (n a multiple of the block size) into this type.
    void (*from_float)(const float* src, void* dst, int64_t n);
    // Dot product of n elements: `w` in this type, `x` in vec_dot_type.
    float (*vec_dot)(int64_t n, const void* w, const void* x);
    // A tile of dot products, for matrix-matrix products (prefill): for
    // r < n_rows and c < n_cols, y[c * y_stride + r] = vec_dot(n, w_r, x_c)
    // where w_r = w + r * w_stride and x_c = x + c * x_stride (bytes). Fast
    // kernels hold several rows x columns in registers so each weight block
    // is loaded once per tile instead of once per column.
    void (*vec_dot_tile)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                         int n_cols, float* y, size_t y_stride);
    // The same tile over weights in the group layout (ops/row_groups.h):
    // n_groups groups of kGroupRows rows, group g at w + g * group_stride, and
    // y[c * y_stride + 16 g + r] = vec_dot(n, row r of group g, x_c). x_sums
    // holds the sum of each activation block's values, column c's at
    // x_sums + c * sums_stride (QuantizedActivation::block_sums). nullptr
    // where this CPU target has no such kernel: matrices then keep GGUF's
    // row layout (copy_to_private_memory groups only what a kernel can read).
    //
    // With unit_n < n the n elements are cut into units of unit_n (a multiple
    // of the block size; the last unit may be shorter), and unit u's dot
    // products go to y + u * unit_stride, each the dot product of that unit's
    // elements alone: column-split products (ops/matmul.h, matmul_units) get
    // every unit of a group in one pass over its bytes, in memory order.
    //
    // With accumulate, each unit's sums start from what y holds instead of
    // 0: a row's blocks accumulate in order, so a product cut into column
    // panels (ops/row_groups.h) and resumed panel by panel gives the same
    // bits as one pass.
    void (*vec_dot_groups)(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                           size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                           size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate);
};

// A vec_dot_tile made of single dot products: the reference every tiled
// kernel is tested against, and the fallback for types without one.
template <float (*Dot)(int64_t, const void*, const void*)>
void vec_dot_tile_by_dots(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                          int n_cols, float* y, size_t y_stride) {
    const auto* wb = static_cast<const unsigned char*>(w);
    const auto* xb = static_cast<const unsigned char*>(x);
    for (int c = 0; c < n_cols; ++c) {
        for (int r = 0; r < n_rows; ++r) {
            y[static_cast<size_t>(c) * y_stride + r] = Dot(n, wb + r * w_stride, xb + c * x_stride);
        }
    }
}

// The scalar reference implementation of a type, or nullptr if the engine
// cannot compute with it. Every faster kernel is tested against these.
const QuantTraits* scalar_traits(QuantType type);

// The traits the engine runs with, or nullptr if the type is not supported.
const QuantTraits* compute_traits(QuantType type);

// Like compute_traits, but throws an Error naming `what` (e.g. a tensor) when
// the type is not supported.
const QuantTraits& require_compute_traits(QuantType type, const char* what);

// Like require_compute_traits, for a matrix of weights: the type must also
// have a dot product (Q8_K, an activation-only type, has none).
const QuantTraits& require_weight_traits(QuantType type, const char* what);

// The weight types the engine computes with, by type id ("F32, F16, ...").
std::string supported_weight_types();

// Bytes taken by n elements of `type` (n a multiple of its block size).
uint64_t quant_row_bytes(QuantType type, int64_t n);

}  // namespace tessera
