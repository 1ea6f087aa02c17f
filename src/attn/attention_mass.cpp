#include "attn/attention_mass.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

AttentionMass::AttentionMass(int n_ctx, int n_threads) : n_ctx_(n_ctx), n_threads_(n_threads) {
    if (n_ctx < 1 || n_threads < 1) throw make_error("internal: attention mass of {} positions, {} threads", n_ctx, n_threads);
    rows_.reset(new int64_t[static_cast<size_t>(n_ctx) * n_threads]());
}

void AttentionMass::add_spread(int thread, int first, int n, float weight) {
    const float each = weight / static_cast<float>(n);
    for (int p = first; p < first + n; ++p) add(thread, p, each);
}

void AttentionMass::add_totals(int n, int64_t* out) const {
    for (int t = 0; t < n_threads_; ++t) {
        for (int p = 0; p < n; ++p) out[p] += rows_[index(t, p)];
    }
}

void AttentionMass::compact(std::span<const int> kept) {
    for (int t = 0; t < n_threads_; ++t) {
        int64_t* row = rows_.get() + index(t, 0);
        for (size_t j = 0; j < kept.size(); ++j) row[j] = row[kept[j]];
        std::fill(row + kept.size(), row + n_ctx_, int64_t{0});
    }
}

void AttentionMass::reset(int first, int n) {
    for (int t = 0; t < n_threads_; ++t) std::fill(rows_.get() + index(t, first), rows_.get() + index(t, first + n), int64_t{0});
}

}  // namespace tessera
