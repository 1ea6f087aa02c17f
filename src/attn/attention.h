// Causal attention of a batch of consecutive positions over the cache, dense
// (here) or sparse (sparse_attention.cpp, for long contexts):
// the query at position p reads cached positions [0, p] (or its sliding
// window); for each query head, softmax(q . K * scale) . V (scores soft-capped
// first where the model asks), with query head j reading KV head
// j / q_per_kv (grouped-query attention; q_per_kv = 1 is plain multi-head,
// q_per_kv = n_heads is multi-query).
//
// A batch of positions (a prompt): one KV head's history is converted to
// float once per call (K as rows, V transposed) and shared by its query heads
// and positions; scores and outputs are then tiles of F32 dot products, the
// same SIMD kernels as the matrices, so a prompt's attention is matrix-matrix
// work rather than one dot at a time.
//
// One position (generation): converting the whole history for a single query
// would cost more than the attention itself, so the cache is read in place, in
// its own types: scores as a tile of dot products over the head's K rows (the
// query converted to Q8_0 first where K is Q8_0 or Q4_0), the output as
// weighted sums of its V rows (ops/weighted_rows.h).
#pragma once

#include "attn/attention_mass.h"
#include "attn/kv_cache.h"
#include "attn/sparse_pattern.h"
#include "util/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tessera {

struct QuantTraits;

// A layer's attention options (model/architecture.h says which a model uses).
struct AttentionOptions {
    float scale = 0.0f;     // score multiplier; 0 means 1 / sqrt(head_dim)
    float soft_cap = 0.0f;  // when > 0, scores become cap * tanh(scores / cap) (Gemma 2)
    int window = 0;         // when > 0, the query at p sees only positions p - window < q <= p
    // Attention sinks (gpt-oss): when set, query head h's softmax also counts
    // a position of logit sinks[h] that has no value (h: the heads the
    // caller passes, from 0).
    const float* sinks = nullptr;
    // Sparse attention (sparse_pattern.h) for a layer without a window of
    // its own: a query that reads what dense reads (sparse_is_dense_at), and
    // a batch whose every query does, runs the dense code: dense's bits.
    SparseOptions sparse;
    // When set, every softmax weight is added to the position it weighs
    // (heavy-hitter eviction's ranking; scratch thread = counter row).
    AttentionMass* mass = nullptr;
};

class Attention {
public:
    Attention(int n_ctx, int head_dim, int n_kv_heads, int n_threads);

    // Queries of the n_tok positions pos0 .. pos0 + n_tok - 1, whose K/V are
    // already stored: row t of q (at q + t * q_stride) holds n_q_heads heads of
    // head_dim floats; out has the same layout with out_stride.
    void attend(const KvCache& cache, int layer, int pos0, int n_tok, const float* q, int64_t q_stride,
                int n_q_heads, int q_per_kv, float* out, int64_t out_stride, ThreadPool& pool,
                const AttentionOptions& options = {});

    // One position's attention for the query heads of KV head `kv_head` only
    // (q and out as in attend, one row): what attend runs per KV head for a
    // single position, for a caller that runs its own parallel region over
    // the heads (and does per-head work around it). `thread` < n_threads
    // picks the scratch; calls at once must use different ones.
    void attend_one_head(const KvCache& cache, int layer, int pos, const float* q, int kv_head, int q_per_kv,
                         float* out, int thread, const AttentionOptions& options = {});

private:
    // Positions (or query heads) whose scores one thread holds at a time.
    static constexpr int kTokenBlock = 32;

    void attend_one(const KvCache& cache, int layer, int pos, const float* q, int n_q_heads, int q_per_kv,
                    float* out, ThreadPool& pool, const AttentionOptions& options);
    // One position's sparse attention for one KV head (attn/sparse_attention.cpp):
    // scores over the window's rows in place, the scattered rows and landmark
    // rows gathered, one softmax over them all, the values summed likewise.
    void attend_sparse_head(const KvCache& cache, int layer, int pos, const float* q, int kv_head, int q_per_kv,
                            float* out, int thread, const AttentionOptions& options);
    // `heads` query heads (head_dim floats each) as the keys' dot product
    // reads them: in place for float keys; for block-quantized keys
    // converted to their dot type (Q8_0, as llama.cpp converts the query for
    // its K·Q product) into the thread's scratch. Sets *row_bytes.
    const void* query_for_keys(const QuantTraits& k_traits, const float* q, int heads, int thread, size_t* row_bytes);
    // Scales (and soft-caps) n scores of query head `head`, then turns them
    // into softmax weights (with the head's sink where there are sinks).
    void weigh(float* scores, int n, int head, const AttentionOptions& options) const;

    int n_ctx_;
    int head_dim_;
    int n_kv_heads_;
    int n_threads_;
    // Uninitialized buffers, sized once for the whole context: pages are
    // touched only as positions fill, and the token loop never allocates.
    std::unique_ptr<float[]> k_rows_;    // [kv_head][pos][head_dim]
    std::unique_ptr<float[]> v_cols_;    // [kv_head][head_dim][n_ctx] (V transposed)
    std::unique_ptr<float[]> v_rows_;    // [thread][pos][head_dim] (conversion scratch)
    std::unique_ptr<float[]> scores_;    // [thread][kTokenBlock][n_ctx]
    std::unique_ptr<uint8_t[]> q_scratch_;  // [thread][kTokenBlock][q_scratch_row_]: queries in K's dot type
    size_t q_scratch_row_ = 0;
    // Per thread, grown on first use: a sparse query's candidates, its scores
    // [head][candidate], gathered K/V rows and landmark rows, one head's sums.
    struct SparseScratch {
        SparseCandidates candidates;
        std::vector<float> scores;
        std::vector<uint8_t> k_rows, v_rows;
        std::vector<float> lm_k, lm_v;
        std::vector<float> sums;
    };
    std::vector<SparseScratch> sparse_;
};

}  // namespace tessera
