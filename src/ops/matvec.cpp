#include "ops/matvec.h"

#include "util/error.h"

namespace tessera {

void QuantizedActivation::quantize(const float* x, int64_t n, QuantType type) {
    const QuantTraits& traits = require_compute_traits(type, "activation");
    const uint64_t bytes = quant_row_bytes(type, n);
    if (bytes_.size() < bytes) bytes_.resize(bytes);
    traits.from_float(x, bytes_.data(), n);
    type_ = type;
    n_ = n;
}

const uint8_t* QuantizedActivation::at(int64_t index) const {
    return bytes_.data() + quant_row_bytes(type_, index);
}

void matvec(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, ThreadPool& pool) {
    const QuantTraits& traits = require_compute_traits(w.type, "matvec");
    if (x.type() != traits.vec_dot_type || x.size() != rect.n_cols) {
        throw make_error("internal: matvec activation is {}x{} but the rect needs {}x{}", quant_type_name(x.type()),
                         x.size(), quant_type_name(traits.vec_dot_type), rect.n_cols);
    }
    const uint64_t col_offset = quant_row_bytes(w.type, rect.col_begin);
    const void* xq = x.at(0);
    const int64_t n_cols = rect.n_cols;
    auto* vec_dot = traits.vec_dot;
    pool.parallel_for(rect.row_end - rect.row_begin, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            y[i] = vec_dot(n_cols, w.row(rect.row_begin + i) + col_offset, xq);
        }
    });
}

void matvec(const Matrix& w, const QuantizedActivation& x, float* y, ThreadPool& pool) {
    matvec(w, MatRect{0, w.rows, 0, w.cols}, x, y, pool);
}

void dequantize_row(const Matrix& w, int64_t r, float* dst) {
    require_compute_traits(w.type, "embedding").to_float(w.row(r), dst, w.cols);
}

}  // namespace tessera
