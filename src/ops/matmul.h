// Matrix-matrix products for a batch of positions (prompt processing): the
// same rectangle of a weight matrix as matvec, applied to n_tok activation
// rows at once. Weights are read from memory once per block of rows and
// reused across every position from cache, which is what makes a prompt far
// faster than token by token.
#pragma once

#include "ops/matvec.h"

namespace tessera {

// For every token t < x.n_rows() and row r of the rect:
//   y[t * y_stride + (r - row_begin)] = dot(w[r][col_begin : col_begin + n_cols], x.row(t)).
void matmul(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, int64_t y_stride,
            ThreadPool& pool);

}  // namespace tessera
