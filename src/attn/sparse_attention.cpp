// Sparse attention for long contexts (ruvllm's, attn/sparse_pattern.h): one
// position's query reads its window's rows in place, gathers the scattered
// rows and the landmark rows (the mean K/V of a block), and takes one softmax
// over them all; the values are summed likewise. Attention::attend_one_head
// calls it for a layer with sparse options whose query reaches beyond what
// dense would read; a query whose window covers every position runs the
// dense code (dense's bits).
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

void Attention::attend_sparse_head(const KvCache& cache, int layer, int pos, const float* q, int kv_head,
                                        int q_per_kv, float* out, int thread, const AttentionOptions& options) {
    const SparseOptions& o = options.sparse;
    const bool landmarks = o.landmarks != LandmarkMode::kOff;
    if (landmarks && cache.landmark_block() != o.block) {
        throw make_error("internal: sparse attention over blocks of {} in a cache keeping landmarks of {}", o.block,
                         cache.landmark_block());
    }
    const int hd = head_dim_;
    SparseScratch& s = sparse_[static_cast<size_t>(thread)];
    sparse_candidates(pos, o, s.candidates);
    const int w0 = s.candidates.window_begin;
    const int n_w = pos - w0 + 1;
    const auto n_t = static_cast<int>(s.candidates.tokens.size());
    const auto n_l = static_cast<int>(s.candidates.blocks.size());
    const int n_all = n_w + n_t + n_l;
    const size_t krb = cache.k_row_bytes(), vrb = cache.v_row_bytes();
    const QuantTraits& k_traits = require_compute_traits(cache.k_type(), "attention");
    const QuantTraits& f32 = require_compute_traits(QuantType::F32, "attention");

    // The scattered rows side by side, so each is one tile like the window.
    const uint8_t* k_all = cache.k_rows(layer, kv_head);
    const uint8_t* v_all = cache.v_rows(layer, kv_head);
    s.k_rows.resize(static_cast<size_t>(n_t) * krb);
    s.v_rows.resize(static_cast<size_t>(n_t) * vrb);
    for (int i = 0; i < n_t; ++i) {
        const auto p = static_cast<size_t>(s.candidates.tokens[static_cast<size_t>(i)]);
        std::memcpy(s.k_rows.data() + i * krb, k_all + p * krb, krb);
        std::memcpy(s.v_rows.data() + i * vrb, v_all + p * vrb, vrb);
    }
    const float* lm_k = landmarks ? cache.landmark_k(layer, kv_head) : nullptr;
    const float* lm_v = landmarks ? cache.landmark_v(layer, kv_head) : nullptr;
    if (n_l > 0 && s.candidates.blocks.back() + 1 != n_l) {
        // Not blocks 0 .. n_l - 1 (the seed's choice): gathered too.
        s.lm_k.resize(static_cast<size_t>(n_l) * hd);
        s.lm_v.resize(static_cast<size_t>(n_l) * hd);
        for (int i = 0; i < n_l; ++i) {
            const auto b = static_cast<size_t>(s.candidates.blocks[static_cast<size_t>(i)]);
            std::copy_n(lm_k + b * hd, hd, s.lm_k.data() + static_cast<size_t>(i) * hd);
            std::copy_n(lm_v + b * hd, hd, s.lm_v.data() + static_cast<size_t>(i) * hd);
        }
        lm_k = s.lm_k.data();
        lm_v = s.lm_v.data();
    }

    size_t q_row = 0;
    const int block_heads = std::min(kTokenBlock, q_per_kv);
    s.scores.resize(static_cast<size_t>(block_heads) * n_all);
    s.sums.resize(static_cast<size_t>(block_heads) * hd);
    float* scores = s.scores.data();
    for (int j0 = 0; j0 < q_per_kv; j0 += kTokenBlock) {
        const int heads = std::min(kTokenBlock, q_per_kv - j0);
        const float* qh = q + static_cast<int64_t>(kv_head * q_per_kv + j0) * hd;
        const void* x = query_for_keys(k_traits, qh, heads, thread, &q_row);
        // Scores: [window | scattered | landmarks] per query head.
        k_traits.vec_dot_tile(hd, k_all + static_cast<size_t>(w0) * krb, krb, n_w, x, q_row, heads, scores, n_all);
        if (n_t > 0) k_traits.vec_dot_tile(hd, s.k_rows.data(), krb, n_t, x, q_row, heads, scores + n_w, n_all);
        if (n_l > 0) {
            f32.vec_dot_tile(hd, lm_k, sizeof(float) * hd, n_l, qh, sizeof(float) * hd, heads, scores + n_w + n_t,
                             n_all);
        }
        for (int j = 0; j < heads; ++j) {
            float* sj = scores + static_cast<size_t>(j) * n_all;
            weigh(sj, n_all, kv_head * q_per_kv + j0 + j, options);
            if (options.mass != nullptr) {
                for (int p = 0; p < n_w; ++p) options.mass->add(thread, w0 + p, sj[p]);
                for (int i = 0; i < n_t; ++i) options.mass->add(thread, s.candidates.tokens[static_cast<size_t>(i)], sj[n_w + i]);
                for (int i = 0; i < n_l; ++i) {
                    options.mass->add_spread(thread, s.candidates.blocks[static_cast<size_t>(i)] * o.block, o.block,
                                             sj[n_w + n_t + i]);
                }
            }
        }
        float* oh = out + static_cast<int64_t>(kv_head * q_per_kv + j0) * hd;
        weighted_row_sums(cache.v_type(), v_all + static_cast<size_t>(w0) * vrb, vrb, n_w, scores, n_all, heads, hd,
                          oh, hd);
        const auto add_sums = [&] {
            for (int j = 0; j < heads; ++j) {
                for (int i = 0; i < hd; ++i) oh[j * hd + i] += s.sums[static_cast<size_t>(j) * hd + i];
            }
        };
        if (n_t > 0) {
            weighted_row_sums(cache.v_type(), s.v_rows.data(), vrb, n_t, scores + n_w, n_all, heads, hd,
                              s.sums.data(), hd);
            add_sums();
        }
        if (n_l > 0) {
            weighted_row_sums(QuantType::F32, lm_v, sizeof(float) * hd, n_l, scores + n_w + n_t, n_all, heads, hd,
                              s.sums.data(), hd);
            add_sums();
        }
    }
}

}  // namespace tessera
