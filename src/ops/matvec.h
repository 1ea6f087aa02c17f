// Matrix-vector products over a rectangle of a weight matrix: rows
// [row_begin, row_end) and columns [col_begin, col_begin + n_cols). Working on
// a rectangle is what lets the forward pass run over a slice of the model:
// a tensor-parallel rank owns some output rows of wq/wk/wv/w1/w3 and some input
// columns of wo/w2, and reads only those bytes.
#pragma once

#include "ops/matrix.h"
#include "ops/quant_traits.h"
#include "util/thread_pool.h"

#include <cstdint>
#include <vector>

namespace tessera {

// Activations converted once to the vec_dot type of the matrices they meet:
// n_rows rows (one per position) of n elements each. The buffer is reused
// across calls and only grows, so the token loop does not allocate.
class QuantizedActivation {
public:
    // Converts rows x[r * x_stride, r * x_stride + n) for r < n_rows to `type`
    // (a vec_dot_type: F32, Q8_0 or Q8_K).
    void quantize(const float* x, int64_t n, QuantType type, int64_t n_rows = 1, int64_t x_stride = 0);
    // quantize in parts, for a caller that converts values in the same pass
    // (and on the same thread) that computes them, while they are in cache:
    // prepare sizes the activation for n_rows rows of n elements of `type`;
    // quantize_span then converts elements [begin, end) of row r from x_row
    // (the row's element 0). begin and end fall on the type's blocks (end may
    // be n); spans of different threads may run at once.
    void prepare(int64_t n, QuantType type, int64_t n_rows = 1);
    void quantize_span(const float* x_row, int64_t r, int64_t begin, int64_t end);
    QuantType type() const { return type_; }
    int64_t size() const { return n_; }
    int64_t n_rows() const { return n_rows_; }
    uint64_t row_bytes() const { return row_bytes_; }
    // Start of row r.
    const uint8_t* row(int64_t r) const { return bytes_.data() + static_cast<uint64_t>(r) * row_bytes_; }
    // Start of element `index` of row 0 (a multiple of the type's block size).
    const uint8_t* at(int64_t index) const;
    // Q8_0 only: the sum of each block's 32 values, row r's n / 32 sums at
    // block_sums(r) (grouped Q4_0 kernels fold the weights' offset of 8 in
    // with them; see ops/row_groups.h).
    const int32_t* block_sums(int64_t r) const { return sums_.data() + r * sums_stride(); }
    int64_t sums_stride() const { return n_ / 32; }

private:
    QuantType type_ = QuantType::F32;
    const QuantTraits* traits_ = nullptr;
    int64_t n_ = 0;
    int64_t n_rows_ = 0;
    uint64_t row_bytes_ = 0;
    std::vector<uint8_t> bytes_;
    std::vector<int32_t> sums_;
};

struct MatRect {
    int64_t row_begin;
    int64_t row_end;
    int64_t col_begin;
    int64_t n_cols;
};

// y[r - row_begin] = dot(w[r][col_begin : col_begin + n_cols], x) for r in the
// rect. `x` holds exactly n_cols elements in w's vec_dot type (its row 0 is
// used). col_begin and n_cols must fall on block boundaries of w's type.
void matvec(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, ThreadPool& pool);

// The whole matrix: y = w x.
void matvec(const Matrix& w, const QuantizedActivation& x, float* y, ThreadPool& pool);

// Byte offset of the rect's first column within a row of w, after checking
// that the rect lies inside the rows and columns w holds.
uint64_t rect_col_offset(const Matrix& w, const MatRect& rect);

// Throws unless x is in w's vec_dot type with rect.n_cols elements per row.
void check_activation(const QuantTraits& traits, const MatRect& rect, const QuantizedActivation& x);

// Dequantizes row r of w into dst[0, cols) (embedding lookup).
void dequantize_row(const Matrix& w, int64_t r, float* dst);

}  // namespace tessera
