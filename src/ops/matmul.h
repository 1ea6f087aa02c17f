// Matrix-matrix products for a batch of positions (prompt processing): the
// same rectangle of a weight matrix as matvec, applied to n_tok activation
// rows at once. Weights are read from memory once per block of rows and
// reused across every position from cache, which is what makes a prompt far
// faster than token by token. A batch of one position is a matrix-vector
// product (token generation).
#pragma once

#include "ops/matvec.h"

#include <span>

namespace tessera {

// One product: for every token t < x.n_rows() and row r of the rect,
//   y[t * y_stride + (r - row_begin)] = dot(w[r][col_begin : col_begin + n_cols], x.row(t)).
// Every dot product is multiplied by w->out_scale times the job's scale (a
// mixture of experts' per-expert factor), as a product's last step: after
// each column unit's sum in matmul_units, before it is snapped.
struct MatmulJob {
    const Matrix* w;
    MatRect rect;
    float* y;
    int64_t y_stride;
    float scale = 1.0f;
};

void matmul(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, int64_t y_stride,
            ThreadPool& pool);

// Several products of the same activation (wq/wk/wv, or gate/up) in one
// parallel loop: one wake-up of the pool instead of one per matrix, which
// matters at a few hundred products per generated token. Every job's matrix
// must take x's type as its vec_dot type.
// At most kMatmulManyMaxJobs jobs: a mixture of experts' gate and up of its
// chosen experts (2 x 8 for Qwen3-MoE, 2 x 16 at most of the families read).
constexpr size_t kMatmulManyMaxJobs = 32;
void matmul_many(std::span<const MatmulJob> jobs, const QuantizedActivation& x, ThreadPool& pool);

// Column-split products summed exactly (ops/fixed_sum.h): the rect's columns
// fall into units of unit_cols columns counted from column 0 of the whole
// matrix (the last unit of the matrix may be shorter); for each row r and
// position t, y[t * y_stride + r - row_begin] = sum over the rect's units of
// snap_to_grid(dot(w[r][unit], x[t][unit])). rect.col_begin must start a unit,
// and unit_cols must fall on block boundaries of w's type and x's type. Any
// split of a matrix's units into rects gives partials whose sum (in any
// order) is the whole matrix's result, bit for bit.
void matmul_units(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, int64_t unit_cols, double* y,
                  int64_t y_stride, ThreadPool& pool, float scale = 1.0f);

// Several column-split products of one matrix in one parallel loop (a
// mixture of experts' chosen experts' down products for one position): job
// i's rows `rect` against position x_row of x into y (the rect's rows), each
// row's bits those of matmul_units with x_row alone. At most
// kMatmulManyMaxJobs jobs.
struct UnitsJob {
    MatRect rect;
    int64_t x_row;
    double* y;
    float scale = 1.0f;
};
void matmul_units_many(const Matrix& w, std::span<const UnitsJob> jobs, const QuantizedActivation& x,
                       int64_t unit_cols, ThreadPool& pool);

}  // namespace tessera
