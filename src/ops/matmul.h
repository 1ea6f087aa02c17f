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
struct MatmulJob {
    const Matrix* w;
    MatRect rect;
    float* y;
    int64_t y_stride;
};

void matmul(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, int64_t y_stride,
            ThreadPool& pool);

// Several products of the same activation (wq/wk/wv, or gate/up) in one
// parallel loop: one wake-up of the pool instead of one per matrix, which
// matters at a few hundred products per generated token. Every job's matrix
// must take x's type as its vec_dot type.
void matmul_many(std::span<const MatmulJob> jobs, const QuantizedActivation& x, ThreadPool& pool);

}  // namespace tessera
