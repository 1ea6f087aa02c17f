// Dense causal attention of one position over the cached positions [0, n_pos):
// for each query head, softmax(q . K / sqrt(head_dim)) . V, with query head j
// reading KV head j / q_per_kv (grouped-query attention; q_per_kv = 1 is plain
// multi-head, q_per_kv = n_heads is multi-query).
#pragma once

#include "attn/kv_cache.h"
#include "util/thread_pool.h"

#include <vector>

namespace tessera {

class DenseAttention {
public:
    DenseAttention(int n_ctx, int n_threads);

    // q: n_q_heads * head_dim floats; out: the same size.
    void attend(const KvCache& cache, int layer, int n_pos, const float* q, int n_q_heads, int q_per_kv, float* out,
                ThreadPool& pool);

private:
    int n_ctx_;
    std::vector<std::vector<float>> scores_;  // one scratch row per thread
};

}  // namespace tessera
