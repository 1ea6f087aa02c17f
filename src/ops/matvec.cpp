#include "ops/matvec.h"

#include "ops/quant_blocks.h"
#include "util/error.h"

namespace tessera {

void QuantizedActivation::quantize(const float* x, int64_t n, QuantType type, int64_t n_rows, int64_t x_stride) {
    prepare(n, type, n_rows);
    if (x_stride == 0) x_stride = n;
    for (int64_t r = 0; r < n_rows; ++r) quantize_span(x + r * x_stride, r, 0, n);
}

void QuantizedActivation::prepare(int64_t n, QuantType type, int64_t n_rows) {
    traits_ = &require_compute_traits(type, "activation");
    if (n_rows < 1) throw make_error("internal: activation of {} rows", n_rows);
    if (n % layout_of(type).block_size != 0) {
        throw make_error("internal: activation of {} values in blocks of {}", n, layout_of(type).block_size);
    }
    row_bytes_ = quant_row_bytes(type, n);
    const uint64_t bytes = row_bytes_ * static_cast<uint64_t>(n_rows);
    if (bytes_.size() < bytes) bytes_.resize(bytes);
    type_ = type;
    n_ = n;
    n_rows_ = n_rows;
    if (type == QuantType::Q8_0) {
        const auto n_sums = static_cast<size_t>(n / kQ8_0Block * n_rows);
        if (sums_.size() < n_sums) sums_.resize(n_sums);
    }
}

void QuantizedActivation::quantize_span(const float* x_row, int64_t r, int64_t begin, int64_t end) {
    const int64_t block = layout_of(type_).block_size;
    if (r < 0 || r >= n_rows_ || begin < 0 || begin > end || end > n_ || begin % block != 0 || end % block != 0) {
        throw make_error("internal: span [{}, {}) of row {} of a {}x{} activation", begin, end, r, n_rows_, n_);
    }
    uint8_t* row_bytes = bytes_.data() + static_cast<uint64_t>(r) * row_bytes_;
    traits_->from_float(x_row + begin, row_bytes + quant_row_bytes(type_, begin), end - begin);
    if (type_ == QuantType::Q8_0) {
        int32_t* sums = sums_.data() + r * sums_stride();
        for (int64_t b = begin / kQ8_0Block; b < end / kQ8_0Block; ++b) {
            const auto* q = reinterpret_cast<const int8_t*>(row_bytes + b * sizeof(BlockQ8_0) + 2);
            int32_t sum = 0;
            for (int i = 0; i < kQ8_0Block; ++i) sum += q[i];
            sums[b] = sum;
        }
    }
}

const uint8_t* QuantizedActivation::at(int64_t index) const {
    return bytes_.data() + quant_row_bytes(type_, index);
}

void check_activation(const QuantTraits& traits, const MatRect& rect, const QuantizedActivation& x) {
    if (x.type() != traits.vec_dot_type || x.size() != rect.n_cols) {
        throw make_error("internal: activation is {}x{} but the rect needs {}x{}", quant_type_name(x.type()),
                         x.size(), quant_type_name(traits.vec_dot_type), rect.n_cols);
    }
}

uint64_t rect_col_offset(const Matrix& w, const MatRect& rect) {
    const int64_t col = rect.col_begin - w.col_begin;
    if (rect.row_begin < w.row_begin || rect.row_begin > rect.row_end || rect.row_end > w.row_end() || col < 0 ||
        rect.n_cols < 0 || col + rect.n_cols > w.cols) {
        throw make_error("internal: rect rows [{}, {}) cols [{}, +{}) outside a matrix of rows [{}, {}), cols [{}, +{})",
                         rect.row_begin, rect.row_end, rect.col_begin, rect.n_cols, w.row_begin, w.row_end(),
                         w.col_begin, w.cols);
    }
    return quant_row_bytes(w.type, col);
}

void matvec(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, ThreadPool& pool) {
    const QuantTraits& traits = require_weight_traits(w.type, "matvec");
    if (w.grouped) throw make_error("internal: matvec over grouped weights (use matmul)");
    check_activation(traits, rect, x);
    const uint64_t col_offset = rect_col_offset(w, rect);
    const void* xq = x.row(0);
    const int64_t n_cols = rect.n_cols;
    auto* vec_dot = traits.vec_dot;
    pool.parallel_for(rect.row_end - rect.row_begin, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            y[i] = vec_dot(n_cols, w.row(rect.row_begin + i) + col_offset, xq);
        }
    });
}

void matvec(const Matrix& w, const QuantizedActivation& x, float* y, ThreadPool& pool) {
    matvec(w, MatRect{w.row_begin, w.row_end(), w.col_begin, w.cols}, x, y, pool);
}

void dequantize_row(const Matrix& w, int64_t r, float* dst) {
    if (w.grouped) throw make_error("internal: a row of grouped weights");
    require_compute_traits(w.type, "embedding").to_float(w.row(r), dst, w.cols);
}

}  // namespace tessera
