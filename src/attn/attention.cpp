#include "attn/attention.h"

#include "ops/activation.h"
#include "ops/quant_traits.h"
#include "ops/softmax.h"
#include "ops/weighted_rows.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// The first position the query at `pos` sees.
int first_visible(int pos, const AttentionOptions& options) {
    return options.window > 0 ? std::max(0, pos - options.window + 1) : 0;
}
}  // namespace

void Attention::weigh(float* scores, int n, int head, const AttentionOptions& options) const {
    const float scale = options.scale > 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(head_dim_));
    for (int p = 0; p < n; ++p) scores[p] *= scale;
    if (options.soft_cap > 0.0f) soft_cap(scores, n, options.soft_cap);
    if (options.sinks == nullptr) {
        softmax(scores, n);
        return;
    }
    // The sink as one more (unscaled) score, its weight dropped: ggml's
    // soft_max with sinks. A copy, so the caller's rows keep their stride.
    thread_local std::vector<float> with_sink;
    with_sink.assign(scores, scores + n);
    with_sink.push_back(options.sinks[head]);
    softmax(with_sink.data(), n + 1);
    std::copy_n(with_sink.data(), n, scores);
}

Attention::Attention(int n_ctx, int head_dim, int n_kv_heads, int n_threads)
    : n_ctx_(n_ctx), head_dim_(head_dim), n_kv_heads_(n_kv_heads), n_threads_(n_threads) {
    const auto kv = static_cast<size_t>(n_kv_heads) * static_cast<size_t>(n_ctx) * static_cast<size_t>(head_dim);
    k_rows_.reset(new float[kv]);
    v_cols_.reset(new float[kv]);
    v_rows_.reset(new float[static_cast<size_t>(n_threads) * static_cast<size_t>(n_ctx) * head_dim]);
    scores_.reset(new float[static_cast<size_t>(n_threads) * kTokenBlock * static_cast<size_t>(n_ctx)]);
    // Room for a query head in any dot type (Q8_0 is smaller than F32).
    q_scratch_row_ = sizeof(float) * static_cast<size_t>(head_dim);
    q_scratch_.reset(new uint8_t[static_cast<size_t>(n_threads) * kTokenBlock * q_scratch_row_]);
    sparse_.resize(static_cast<size_t>(n_threads));
}

void Attention::attend(const KvCache& cache, int layer, int pos0, int n_tok, const float* q, int64_t q_stride,
                            int n_q_heads, int q_per_kv, float* out, int64_t out_stride, ThreadPool& pool,
                            const AttentionOptions& options) {
    const int n_pos = pos0 + n_tok;  // cached positions the last query reads
    if (pos0 < 0 || n_tok <= 0 || n_pos > n_ctx_) {
        throw make_error("internal: attention of positions {}..{} in a context of {}", pos0, n_pos, n_ctx_);
    }
    if (cache.head_dim() != head_dim_ || n_q_heads > n_kv_heads_ * q_per_kv || n_q_heads % q_per_kv != 0) {
        throw make_error("internal: attention shape ({} query heads, {} per KV head) does not fit ({} KV heads)",
                         n_q_heads, q_per_kv, n_kv_heads_);
    }
    if (n_tok == 1) {
        attend_one(cache, layer, pos0, q, n_q_heads, q_per_kv, out, pool, options);
        return;
    }
    if (options.window == 0 && !sparse_is_dense_at(n_pos - 1, options.sparse)) {
        // Sparse prefill: each position's candidates, one position and KV
        // head per item (a query's candidates are its own).
        const int n_kv = n_q_heads / q_per_kv;
        const int64_t items = static_cast<int64_t>(n_tok) * n_kv;
        pool.run([&](int thread, int n_threads) {
            for (int64_t item = thread; item < items; item += n_threads) {
                const auto t = static_cast<int>(item / n_kv);
                attend_one_head(cache, layer, pos0 + t, q + t * q_stride, static_cast<int>(item % n_kv), q_per_kv,
                                out + t * out_stride, thread, options);
            }
        });
        return;
    }
    const int hd = head_dim_;
    const int n_kv = n_q_heads / q_per_kv;
    const size_t head_floats = static_cast<size_t>(n_ctx_) * hd;
    const QuantTraits& f32 = require_compute_traits(QuantType::F32, "attention");

    // Each KV head's history as float: K rows and V transposed (so the
    // weighted sum over positions is a row of dot products too).
    pool.run([&](int thread, int n_threads) {
        float* v_rows = v_rows_.get() + static_cast<size_t>(thread) * head_floats;
        for (int h = thread; h < n_kv; h += n_threads) {
            cache.load_k_rows(layer, h, n_pos, k_rows_.get() + h * head_floats);
            cache.load_v_rows(layer, h, n_pos, v_rows);
            float* v_cols = v_cols_.get() + h * head_floats;
            for (int p = 0; p < n_pos; ++p) {
                for (int i = 0; i < hd; ++i) v_cols[static_cast<size_t>(i) * n_ctx_ + p] = v_rows[p * hd + i];
            }
        }
    });

    const int n_blocks = (n_tok + kTokenBlock - 1) / kTokenBlock;
    const int n_items = n_q_heads * n_blocks;
    pool.run([&](int thread, int n_threads) {
        float* scores = scores_.get() + static_cast<size_t>(thread) * kTokenBlock * n_ctx_;
        for (int item = thread; item < n_items; item += n_threads) {
            const int h = item / n_blocks;
            const int t0 = (item % n_blocks) * kTokenBlock;
            const int toks = std::min(kTokenBlock, n_tok - t0);
            const int kvh = h / q_per_kv;
            // The last query of the block reads this many positions; earlier
            // ones fewer (their extra scores are masked to zero weight).
            const int n_read = pos0 + t0 + toks;
            const float* qh = q + t0 * q_stride + static_cast<int64_t>(h) * hd;
            f32.vec_dot_tile(hd, k_rows_.get() + kvh * head_floats, sizeof(float) * hd, n_read, qh,
                             sizeof(float) * q_stride, toks, scores, n_ctx_);
            for (int t = 0; t < toks; ++t) {
                float* s = scores + static_cast<size_t>(t) * n_ctx_;
                const int n_valid = pos0 + t0 + t + 1;
                const int first = first_visible(n_valid - 1, options);
                weigh(s + first, n_valid - first, h, options);
                if (options.mass != nullptr) {
                    for (int p = first; p < n_valid; ++p) options.mass->add(thread, p, s[p]);
                }
                std::fill(s, s + first, 0.0f);
                std::fill(s + n_valid, s + n_read, 0.0f);
            }
            float* oh = out + t0 * out_stride + static_cast<int64_t>(h) * hd;
            f32.vec_dot_tile(n_read, v_cols_.get() + kvh * head_floats, sizeof(float) * n_ctx_, hd, scores,
                             sizeof(float) * n_ctx_, toks, oh, out_stride);
        }
    });
}

void Attention::attend_one(const KvCache& cache, int layer, int pos, const float* q, int n_q_heads,
                                int q_per_kv, float* out, ThreadPool& pool, const AttentionOptions& options) {
    const int n_kv = n_q_heads / q_per_kv;
    pool.run([&](int thread, int n_threads) {
        for (int h = thread; h < n_kv; h += n_threads) {
            attend_one_head(cache, layer, pos, q, h, q_per_kv, out, thread, options);
        }
    });
}

const void* Attention::query_for_keys(const QuantTraits& k_traits, const float* q, int heads, int thread,
                                          size_t* row_bytes) {
    const int hd = head_dim_;
    if (k_traits.vec_dot_type == QuantType::F32) {
        *row_bytes = sizeof(float) * hd;
        return q;
    }
    const QuantTraits& q_traits = require_compute_traits(k_traits.vec_dot_type, "attention");
    *row_bytes = quant_row_bytes(k_traits.vec_dot_type, hd);
    uint8_t* converted = q_scratch_.get() + static_cast<size_t>(thread) * kTokenBlock * q_scratch_row_;
    for (int j = 0; j < heads; ++j) q_traits.from_float(q + static_cast<int64_t>(j) * hd, converted + j * *row_bytes, hd);
    return converted;
}

void Attention::attend_one_head(const KvCache& cache, int layer, int pos, const float* q, int kv_head,
                                     int q_per_kv, float* out, int thread, const AttentionOptions& options) {
    const int hd = head_dim_;
    const int n_pos = pos + 1;
    if (pos < 0 || n_pos > n_ctx_ || kv_head < 0 || kv_head >= n_kv_heads_ || thread < 0 || thread >= n_threads_ ||
        cache.head_dim() != hd) {
        throw make_error("internal: attention of KV head {} at position {} on thread {} ({} heads, context {})",
                         kv_head, pos, thread, n_kv_heads_, n_ctx_);
    }
    if (options.window == 0 && !sparse_is_dense_at(pos, options.sparse)) {
        attend_sparse_head(cache, layer, pos, q, kv_head, q_per_kv, out, thread, options);
        return;
    }
    const QuantTraits& k_traits = require_compute_traits(cache.k_type(), "attention");
    // A sliding window reads only its last positions of the cache.
    const int first = first_visible(pos, options);
    const int n_seen = n_pos - first;
    const uint8_t* k_rows = cache.k_rows(layer, kv_head) + static_cast<size_t>(first) * cache.k_row_bytes();
    const uint8_t* v_rows = cache.v_rows(layer, kv_head) + static_cast<size_t>(first) * cache.v_row_bytes();
    float* scores = scores_.get() + static_cast<size_t>(thread) * kTokenBlock * n_ctx_;
    size_t q_row = 0;
    // The KV head's query heads, up to kTokenBlock at a time (the rows of the
    // scores buffer).
    for (int j0 = 0; j0 < q_per_kv; j0 += kTokenBlock) {
        const int heads = std::min(kTokenBlock, q_per_kv - j0);
        const float* qh = q + static_cast<int64_t>(kv_head * q_per_kv + j0) * hd;
        const void* x = query_for_keys(k_traits, qh, heads, thread, &q_row);
        k_traits.vec_dot_tile(hd, k_rows, cache.k_row_bytes(), n_seen, x, q_row, heads, scores, n_ctx_);
        for (int j = 0; j < heads; ++j) {
            float* s = scores + static_cast<size_t>(j) * n_ctx_;
            weigh(s, n_seen, kv_head * q_per_kv + j0 + j, options);
            if (options.mass != nullptr) {
                for (int p = 0; p < n_seen; ++p) options.mass->add(thread, first + p, s[p]);
            }
        }
        weighted_row_sums(cache.v_type(), v_rows, cache.v_row_bytes(), n_seen, scores, n_ctx_, heads, hd,
                          out + static_cast<int64_t>(kv_head * q_per_kv + j0) * hd, hd);
    }
}

}  // namespace tessera
