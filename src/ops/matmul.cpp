#include "ops/matmul.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

namespace {
// A block of weight rows stays in L1/L2 while it meets every block of
// positions; a block of positions' activations (a few KiB each) stays in L2.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenBlock = 64;
}  // namespace

void matmul(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, int64_t y_stride,
            ThreadPool& pool) {
    const QuantTraits& traits = require_compute_traits(w.type, "matmul");
    check_activation(traits, rect, x);
    const int64_t n_tok = x.n_rows();
    if (n_tok == 1) {
        matvec(w, rect, x, y, pool);
        return;
    }
    const uint64_t col_offset = quant_row_bytes(w.type, rect.col_begin);
    const int64_t n_rows = rect.row_end - rect.row_begin;
    const int64_t n_row_blocks = (n_rows + kRowBlock - 1) / kRowBlock;
    auto* tile = traits.vec_dot_tile;
    pool.parallel_for(n_row_blocks, [&](int64_t block_begin, int64_t block_end) {
        for (int64_t rb = block_begin; rb < block_end; ++rb) {
            const int64_t r0 = rb * kRowBlock;
            const int rows = static_cast<int>(std::min(kRowBlock, n_rows - r0));
            const uint8_t* wr = w.row(rect.row_begin + r0) + col_offset;
            for (int64_t t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
                const int toks = static_cast<int>(std::min(kTokenBlock, n_tok - t0));
                tile(rect.n_cols, wr, w.row_bytes, rows, x.row(t0), x.row_bytes(), toks,
                     y + t0 * y_stride + r0, static_cast<size_t>(y_stride));
            }
        }
    });
}

}  // namespace tessera
