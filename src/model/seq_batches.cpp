#include "model/seq_batches.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

void SeqBatch::gather_rows(const float* x, int64_t n_embd, std::vector<float>& out) const {
    const size_t n = static_cast<size_t>(n_embd);
    out.resize(rows.size() * n);
    for (size_t f = 0; f < rows.size(); ++f) std::copy_n(x + static_cast<size_t>(rows[f]) * n, n, out.data() + f * n);
}

void SeqBatch::scatter_logits(const float* logits, size_t n_vocab, float* all) const {
    for (size_t f = 0; f < dest.size(); ++f) std::copy_n(logits + f * n_vocab, n_vocab, all + dest[f] * n_vocab);
}

SeqBatches::SeqBatches(std::span<const SeqEval> evals, int n_batch)
    : evals_(evals), n_batch_(static_cast<size_t>(std::max(1, n_batch))), done_(evals.size(), 0) {
    for (const SeqEval& e : evals) {
        if (e.tokens.empty()) throw make_error("internal: eval of no tokens for sequence {}", e.seq);
        first_row_.push_back(output_rows_);
        output_rows_ += e.all ? e.tokens.size() : 1;
    }
}

bool SeqBatches::next(SeqBatch& b) {
    b.runs.clear();
    b.tokens.clear();
    b.rows.clear();
    b.dest.clear();
    for (size_t i = 0; i < evals_.size() && b.tokens.size() < n_batch_; ++i) {
        const SeqEval& e = evals_[i];
        const size_t left = e.tokens.size() - done_[i];
        if (left == 0) continue;
        const size_t take = std::min(left, n_batch_ - b.tokens.size());
        const int row0 = static_cast<int>(b.tokens.size());
        b.runs.push_back({e.seq, e.pos + static_cast<int>(done_[i]), static_cast<int>(take), e.all});
        b.tokens.insert(b.tokens.end(), e.tokens.begin() + static_cast<std::ptrdiff_t>(done_[i]),
                        e.tokens.begin() + static_cast<std::ptrdiff_t>(done_[i] + take));
        if (e.all) {
            for (size_t t = 0; t < take; ++t) {
                b.rows.push_back(row0 + static_cast<int>(t));
                b.dest.push_back(first_row_[i] + done_[i] + t);
            }
        } else if (done_[i] + take == e.tokens.size()) {
            b.rows.push_back(static_cast<int>(b.tokens.size()) - 1);
            b.dest.push_back(first_row_[i]);
        }
        done_[i] += take;
    }
    return !b.runs.empty();
}

}  // namespace tessera
