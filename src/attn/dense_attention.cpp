#include "attn/dense_attention.h"

#include "ops/softmax.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>

namespace tessera {

DenseAttention::DenseAttention(int n_ctx, int n_threads)
    : n_ctx_(n_ctx), scores_(static_cast<size_t>(n_threads), std::vector<float>(static_cast<size_t>(n_ctx))) {}

void DenseAttention::attend(const KvCache& cache, int layer, int n_pos, const float* q, int n_q_heads, int q_per_kv,
                            float* out, ThreadPool& pool) {
    if (n_pos <= 0 || n_pos > n_ctx_) throw make_error("internal: attention over {} of {} positions", n_pos, n_ctx_);
    const int head_dim = cache.head_dim();
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    pool.run([&](int thread, int n_threads) {
        std::vector<float>& scores = scores_[static_cast<size_t>(thread)];
        for (int h = thread; h < n_q_heads; h += n_threads) {
            const int kv_head = h / q_per_kv;
            const float* qh = q + static_cast<int64_t>(h) * head_dim;
            for (int t = 0; t < n_pos; ++t) scores[t] = cache.dot_k(layer, kv_head, t, qh) * scale;
            softmax(scores.data(), n_pos);
            float* oh = out + static_cast<int64_t>(h) * head_dim;
            std::fill(oh, oh + head_dim, 0.0f);
            for (int t = 0; t < n_pos; ++t) cache.add_v(layer, kv_head, t, scores[t], oh);
        }
    });
}

}  // namespace tessera
