#include "model/slice_forward.h"

#include "ops/activation.h"
#include "ops/fixed_sum.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "util/error.h"
#include "util/rng.h"

#include <algorithm>
#include <cmath>

namespace tessera {

SliceForward::SliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, ThreadPool& pool)
    : hparams_(model.hparams()),
      weights_(load_slice_weights(model, slice, ColumnSlices::kPack)),
      pool_(pool),
      attention_(config.n_ctx, hparams_.head_dim, slice.n_kv_heads(), pool.size()),

      n_batch_(std::clamp(config.n_batch, 1, std::max(1, config.n_ctx))),
      sparse_(config.sparse),
      n_q_heads_(slice.n_kv_heads() * hparams_.q_per_kv()),
      q_begin_(static_cast<int64_t>(slice.kv_head_begin) * hparams_.q_per_kv() * hparams_.head_dim),
      units_(reduction_units(model)) {
    if (config.n_seq < 1) throw make_error("internal: {} sequences", config.n_seq);
    validate(sparse_);
    caches_.reserve(static_cast<size_t>(config.n_seq));
    for (int i = 0; i < config.n_seq; ++i) {
        caches_.emplace_back(slice.n_layers(), slice.n_kv_heads(), hparams_.head_dim, config.n_ctx, config.kv_types);
        if (sparse_.enabled && sparse_.landmarks != LandmarkMode::kOff) caches_.back().enable_landmarks(sparse_.block);
        if (config.track_attention) masses_.push_back(std::make_unique<AttentionMass>(config.n_ctx, pool.size()));
    }
    if (config.private_weights) {
        copy_to_private_memory(weights_, hparams_, units_.wo_cols(hparams_), units_.ffn_channels,
                               config.weight_budget);
    }
    bool tails_on_units = true;
    for (const ExpertPart& t : slice.tails) tails_on_units = tails_on_units && t.ffn_begin % units_.ffn_channels == 0;
    if (slice.kv_head_begin % units_.kv_heads != 0 || slice.ffn_begin % units_.ffn_channels != 0 || !tails_on_units) {
        throw make_error("internal: slice {} does not start on reduction units of {} KV heads and {} FFN channels",
                         describe_slice(slice), units_.kv_heads, units_.ffn_channels);
    }
    const auto hd = static_cast<size_t>(hparams_.head_dim);
    const auto nb = static_cast<size_t>(n_batch_);
    q_.resize(nb * static_cast<size_t>(n_q_heads_) * hd);
    attn_.resize(q_.size());
    k_.resize(nb * static_cast<size_t>(slice.n_kv_heads()) * hd);
    v_.resize(k_.size());
    gate_.resize(nb * static_cast<size_t>(slice.n_ffn()));
    up_.resize(gate_.size());
    norm_.resize(nb * static_cast<size_t>(hparams_.n_embd));
    h_.resize(norm_.size());
    partial_.resize(norm_.size());
    for (int layer = slice.layer_begin; layer < slice.layer_end; ++layer) {
        const float base = hparams_.rope_base_of(layer), scale = hparams_.rope_scale_of(layer);
        size_t i = 0;
        while (i < ropes_.size() && !(rope_keys_[i].first == base && rope_keys_[i].second == scale)) ++i;
        if (i == ropes_.size()) {
            ropes_.emplace_back(hparams_.n_rot, base, weights_.rope_freqs, hparams_.family->rope, scale, hparams_.yarn);
            rope_keys_.emplace_back(base, scale);
        }
        rope_of_layer_.push_back(static_cast<int>(i));
    }
}

RopeTable& SliceForward::rope_of(int layer) {
    return ropes_[static_cast<size_t>(rope_of_layer_[static_cast<size_t>(layer - weights_.slice.layer_begin)])];
}

void SliceForward::compact_context(int seq, std::span<const int> kept, int n_used) {
    check_compaction(seq, kept, n_used, n_seq(), n_ctx());
    KvCache& cache = caches_[static_cast<size_t>(seq)];
    const Slice& s = weights_.slice;
    const int hd = hparams_.head_dim;
    for (int layer = s.layer_begin; layer < s.layer_end; ++layer) {
        pool_.run([&](int thread, int n_threads) {
            // Keys hold RoPE at their position: rotating by the move's delta
            // puts them at the new one. A table of the thread's own.
            RopeTable rope = rope_of(layer);
            for (int h = thread; h < s.n_kv_heads(); h += n_threads) {
                cache.compact_positions(layer - s.layer_begin, h, kept, [&](float* k, int delta) {
                    rope.set_position(delta);
                    rope.apply(k, 1, hd);
                });
            }
        });
    }
    if (!masses_.empty()) masses_[static_cast<size_t>(seq)]->compact(kept);
}

void SliceForward::add_attention_mass(int seq, int n_used, int64_t* totals) {
    if (masses_.empty()) throw make_error("internal: attention is not tracked on this slice");
    if (seq < 0 || seq >= n_seq() || n_used < 0 || n_used > n_ctx()) {
        throw make_error("no attention of {} positions of sequence {} (context {}, {} sequences)", n_used, seq, n_ctx(),
                         n_seq());
    }
    masses_[static_cast<size_t>(seq)]->add_totals(n_used, totals);
}

void SliceForward::fill_history(int seq, int n, uint64_t seed) {
    if (seq < 0 || seq >= n_seq() || n < 0 || n > n_ctx()) {
        throw make_error("a history of {} positions does not fit sequence {} (context {})", n, seq, n_ctx());
    }
    KvCache& cache = caches_[static_cast<size_t>(seq)];
    const int hd = hparams_.head_dim;
    pool_.run([&](int thread, int n_threads) {
        Rng rng(seed + static_cast<uint64_t>(thread));
        std::vector<float> k(static_cast<size_t>(hd)), v(k.size());
        for (int layer = thread; layer < weights_.slice.n_layers(); layer += n_threads) {
            for (int h = 0; h < weights_.slice.n_kv_heads(); ++h) {
                for (int p = 0; p < n; ++p) {
                    for (float& x : k) x = rng.next_normal();
                    for (float& x : v) x = rng.next_normal();
                    cache.store_head(layer, h, p, k.data(), v.data());
                }
            }
        }
    });
}

AttentionOptions SliceForward::attention_options(int layer, int seq) const {
    AttentionOptions o = attention_options(layer);
    if (!masses_.empty()) o.mass = masses_[static_cast<size_t>(seq)].get();
    return o;
}

AttentionOptions SliceForward::attention_options(int layer) const {
    AttentionOptions o;
    o.scale = hparams_.query_scale;
    o.soft_cap = hparams_.attn_soft_cap;
    o.window = hparams_.is_sliding(layer) ? hparams_.sliding_window : 0;
    o.sparse = sparse_;
    // Sinks of this slice's query heads.
    const std::vector<float>& sinks = layer_weights(layer).attn_sinks;
    if (!sinks.empty()) o.sinks = sinks.data() + static_cast<int64_t>(weights_.slice.kv_head_begin) * hparams_.q_per_kv();
    return o;
}

void SliceForward::prepare_heads(const LayerWeights& w, int layer, int pos, float* q, float* k, float* v,
                                 int kv_head_begin, int kv_head_end) {
    const int hd = hparams_.head_dim;
    const int q_per_kv = hparams_.q_per_kv();
    const int64_t kv_row0 = static_cast<int64_t>(weights_.slice.kv_head_begin) * hd;  // the slice's first K/V row
    RopeTable& rope = rope_of(layer);
    for (int kvh = kv_head_begin; kvh < kv_head_end; ++kvh) {
        float* qh = q + static_cast<int64_t>(kvh) * q_per_kv * hd;
        float* kh = k + static_cast<int64_t>(kvh) * hd;
        float* vh = v + static_cast<int64_t>(kvh) * hd;
        const int64_t q_row = q_begin_ + static_cast<int64_t>(kvh) * q_per_kv * hd;
        const int64_t kv_row = kv_row0 + static_cast<int64_t>(kvh) * hd;
        if (!w.q_bias.empty()) {
            for (int64_t i = 0; i < q_per_kv * hd; ++i) qh[i] += w.q_bias[static_cast<size_t>(q_row + i)];
        }
        if (!w.k_bias.empty()) {
            for (int i = 0; i < hd; ++i) kh[i] += w.k_bias[static_cast<size_t>(kv_row + i)];
        }
        if (!w.v_bias.empty()) {
            for (int i = 0; i < hd; ++i) vh[i] += w.v_bias[static_cast<size_t>(kv_row + i)];
        }
        if (!w.q_norm.empty()) {
            for (int j = 0; j < q_per_kv; ++j) rms_norm(qh + j * hd, w.q_norm.data(), hd, hparams_.rms_eps, qh + j * hd);
            rms_norm(kh, w.k_norm.data(), hd, hparams_.rms_eps, kh);
        }
        rope.set_position(pos);
        rope.apply(qh, q_per_kv, hd);
        rope.apply(kh, 1, hd);
    }
}

namespace {
// x[t] += output[t] (n_tok rows of n), through `post_norm` where not empty.
void add_output(const std::vector<float>& post_norm, const float* output, float* x, int n_tok, int64_t n, float eps,
                JoinScratch& s) {
    if (!post_norm.empty() && s.normed.size() < static_cast<size_t>(n)) s.normed.resize(static_cast<size_t>(n));
    for (int t = 0; t < n_tok; ++t) {
        const float* o = output + t * n;
        float* xt = x + t * n;
        if (post_norm.empty()) {
            for (int64_t j = 0; j < n; ++j) xt[j] += o[j];
        } else {
            rms_norm(o, post_norm.data(), n, eps, s.normed.data());
            for (int64_t j = 0; j < n; ++j) xt[j] += s.normed[static_cast<size_t>(j)];
        }
    }
}

float* output_rows(JoinScratch& s, int64_t n) {
    if (s.output.size() < static_cast<size_t>(n)) s.output.resize(static_cast<size_t>(n));
    return s.output.data();
}
}  // namespace

void join_attention_output(const LayerWeights& w, const ModelHParams& hp, const double* partial, float* x, int n_tok,
                           JoinScratch& s) {
    const int64_t d = hp.n_embd, n = static_cast<int64_t>(n_tok) * d;
    if (w.wo_bias.empty() && w.post_attn_norm.empty()) {
        for (int64_t j = 0; j < n; ++j) x[j] = add_exact(x[j], partial[j]);
        return;
    }
    // The output's bias joins the whole sum (after every rank's partial),
    // so every plan adds it alike.
    float* output = output_rows(s, n);
    for (int64_t j = 0; j < n; ++j) {
        output[j] = static_cast<float>(partial[j]);
        if (!w.wo_bias.empty()) output[j] += w.wo_bias[static_cast<size_t>(j % d)];
    }
    add_output(w.post_attn_norm, output, x, n_tok, d, hp.rms_eps, s);
}

void join_ffn_output(const LayerWeights& w, const ModelHParams& hp, const double* partial, float* x, int n_tok,
                     JoinScratch& s) {
    const int64_t d = hp.n_embd, n = static_cast<int64_t>(n_tok) * d;
    if (w.post_ffn_norm.empty()) {
        for (int64_t j = 0; j < n; ++j) x[j] = add_exact(x[j], partial[j]);
        return;
    }
    float* output = output_rows(s, n);
    for (int64_t j = 0; j < n; ++j) output[j] = static_cast<float>(partial[j]);
    add_output(w.post_ffn_norm, output, x, n_tok, d, hp.rms_eps, s);
}

void join_attention_output(const LayerWeights& w, const ModelHParams& hp, const float* sum, float* x, int n_tok,
                           JoinScratch& s) {
    const int64_t d = hp.n_embd, n = static_cast<int64_t>(n_tok) * d;
    if (!w.wo_bias.empty()) {
        float* output = output_rows(s, n);
        for (int64_t j = 0; j < n; ++j) output[j] = sum[j] + w.wo_bias[static_cast<size_t>(j % d)];
        add_output(w.post_attn_norm, output, x, n_tok, d, hp.rms_eps, s);
        return;
    }
    add_output(w.post_attn_norm, sum, x, n_tok, d, hp.rms_eps, s);
}

void join_ffn_output(const LayerWeights& w, const ModelHParams& hp, const float* sum, float* x, int n_tok,
                     JoinScratch& s) {
    add_output(w.post_ffn_norm, sum, x, n_tok, hp.n_embd, hp.rms_eps, s);
}

void SliceForward::add_attention_output(int layer, const double* partial, float* x, int n_tok) {
    join_attention_output(layer_weights(layer), hparams_, partial, x, n_tok, join_);
}
void SliceForward::add_ffn_output(int layer, const double* partial, float* x, int n_tok) {
    join_ffn_output(layer_weights(layer), hparams_, partial, x, n_tok, join_);
}
void SliceForward::add_attention_output(int layer, const float* sum, float* x, int n_tok) {
    join_attention_output(layer_weights(layer), hparams_, sum, x, n_tok, join_);
}
void SliceForward::add_ffn_output(int layer, const float* sum, float* x, int n_tok) {
    join_ffn_output(layer_weights(layer), hparams_, sum, x, n_tok, join_);
}

void SliceForward::forward_layers(float* x, int pos0, int n_tok) {
    const SeqRun run{0, pos0, n_tok};
    forward_layers(x, std::span<const SeqRun>(&run, 1));
}

void SliceForward::forward_layers(float* x, std::span<const SeqRun> runs) {
    for (int layer = weights_.slice.layer_begin; layer < weights_.slice.layer_end; ++layer) forward_layer(layer, x, runs);
}

void SliceForward::forward_layer(int layer, float* x, std::span<const SeqRun> runs) {
    const int n_tok = check_runs(runs);
    norm_attention_input(layer, x, h_.data(), n_tok);
    attention_partial(layer, h_.data(), runs, partial_.data());
    add_attention_output(layer, partial_.data(), x, n_tok);
    norm_ffn_input(layer, x, h_.data(), n_tok);
    ffn_partial(layer, h_.data(), n_tok, partial_.data());
    add_ffn_output(layer, partial_.data(), x, n_tok);
}

void SliceForward::check_kv_rows(int layer, int pos0, int n) const {
    const Slice& s = weights_.slice;
    if (layer < s.layer_begin || layer >= s.layer_end || pos0 < 0 || n < 0 || static_cast<int64_t>(pos0) + n > n_ctx()) {
        throw make_error("internal: KV rows {}..{} of layer {} ({}, context {})", pos0, static_cast<int64_t>(pos0) + n,
                         layer, describe_slice(s), n_ctx());
    }
}

void SliceForward::read_kv_floats(int layer, int pos0, int n, float* k, float* v) {
    KvCache& cache = caches_[0];
    const Slice& s = weights_.slice;
    const int hd = hparams_.head_dim;
    const int64_t width = static_cast<int64_t>(s.n_kv_heads()) * hd;
    check_kv_rows(layer, pos0, n);
    pool_.run([&](int thread, int n_threads) {
        RopeTable rope = rope_of(layer);
        for (int t = thread; t < n; t += n_threads) {
            for (int h = 0; h < s.n_kv_heads(); ++h) {
                float* kt = k + t * width + static_cast<int64_t>(h) * hd;
                cache.load_k(layer - s.layer_begin, h, pos0 + t, kt);
                cache.load_v(layer - s.layer_begin, h, pos0 + t, v + t * width + static_cast<int64_t>(h) * hd);
                rope.set_position(-static_cast<int64_t>(pos0 + t));
                rope.apply(kt, 1, hd);
            }
        }
    });
}

void SliceForward::kv_from_input(int layer, const float* h, int n, float* k, float* v) {
    if (weights_.streamed) weights_.streamed->use(layer);
    const LayerWeights& w = layer_weights(layer);
    if (!w.k_bias.empty() || !w.v_bias.empty() || !w.k_norm.empty()) {
        throw make_error("internal: K/V rows from hidden states of a layer with K/V biases or a K norm");
    }
    check_batch(n);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    const int64_t kv_begin = static_cast<int64_t>(s.kv_head_begin) * hparams_.head_dim;
    const int64_t kv_end = static_cast<int64_t>(s.kv_head_end) * hparams_.head_dim;
    new_activations();
    const MatmulJob jobs[] = {{&w.wk, {kv_begin, kv_end, 0, n_embd}, k, kv_end - kv_begin},
                              {&w.wv, {kv_begin, kv_end, 0, n_embd}, v, kv_end - kv_begin}};
    run_jobs(jobs, h, n_embd, n);
    new_activations();
}

void SliceForward::write_kv_floats(int layer, int pos0, int n, const float* k, const float* v) {
    KvCache& cache = caches_[0];
    const Slice& s = weights_.slice;
    const int hd = hparams_.head_dim;
    const int64_t width = static_cast<int64_t>(s.n_kv_heads()) * hd;
    check_kv_rows(layer, pos0, n);
    // Heads over threads: a head's landmark is computed when the last
    // position of its block is stored, after the positions before it.
    pool_.run([&](int thread, int n_threads) {
        RopeTable rope = rope_of(layer);
        std::vector<float> kt(static_cast<size_t>(hd));
        for (int h = thread; h < s.n_kv_heads(); h += n_threads) {
            for (int t = 0; t < n; ++t) {
                std::copy_n(k + t * width + static_cast<int64_t>(h) * hd, hd, kt.data());
                rope.set_position(pos0 + t);
                rope.apply(kt.data(), 1, hd);
                cache.store_head(layer - s.layer_begin, h, pos0 + t, kt.data(), v + t * width + static_cast<int64_t>(h) * hd);
            }
        }
    });
}

uint64_t SliceForward::kv_rows_bytes(int n) const {
    return static_cast<uint64_t>(weights_.slice.n_kv_heads()) * caches_[0].head_rows_bytes(n);
}

void SliceForward::read_kv_rows(int layer, int pos0, int n, std::vector<uint8_t>& out) const {
    read_kv_rows(layer, pos0, n, weights_.slice.kv_head_begin, weights_.slice.kv_head_end, out);
}

void SliceForward::read_kv_rows(int layer, int pos0, int n, int kv_head_begin, int kv_head_end,
                                std::vector<uint8_t>& out) const {
    const KvCache& cache = caches_[0];
    const Slice& s = weights_.slice;
    const int local = layer - s.layer_begin;
    if (local < 0 || local >= s.n_layers() || kv_head_begin < s.kv_head_begin || kv_head_end > s.kv_head_end ||
        kv_head_begin > kv_head_end || pos0 < 0 || n < 0 || pos0 + n > cache.n_ctx()) {
        throw make_error("internal: KV rows of heads {}..{}, positions {}..{} of layer {} from a slice of {}",
                         kv_head_begin, kv_head_end, pos0, pos0 + n, layer, describe_slice(s));
    }
    out.resize(static_cast<uint64_t>(kv_head_end - kv_head_begin) * cache.head_rows_bytes(n));
    for (int h = kv_head_begin; h < kv_head_end; ++h) {
        cache.read_rows(local, h - s.kv_head_begin, pos0, n,
                        out.data() + static_cast<uint64_t>(h - kv_head_begin) * cache.head_rows_bytes(n));
    }
}

void SliceForward::write_kv_rows(int layer, int pos0, int n, std::span<const uint8_t> rows) {
    KvCache& cache = caches_[0];
    const int local = layer - weights_.slice.layer_begin;
    if (rows.size() != kv_rows_bytes(n) || local < 0 || local >= weights_.slice.n_layers()) {
        throw make_error("internal: {} bytes of KV rows for {} positions of layer {} (this slice keeps {} bytes a "
                         "position, layers {})", rows.size(), n, layer, kv_rows_bytes(1), describe_slice(weights_.slice));
    }
    for (int h = 0; h < weights_.slice.n_kv_heads(); ++h) {
        cache.write_rows(local, h, pos0, n, rows.data() + static_cast<uint64_t>(h) * cache.head_rows_bytes(n));
    }
}

const LayerWeights& SliceForward::layer_weights(int layer) const {
    const Slice& s = weights_.slice;
    if (layer < s.layer_begin || layer >= s.layer_end) {
        throw make_error("internal: layer {} is not in this slice ({})", layer, describe_slice(s));
    }
    return weights_.layers[static_cast<size_t>(layer - s.layer_begin)];
}

void SliceForward::check_batch(int n_tok) const {
    if (n_tok < 1 || n_tok > n_batch_) throw make_error("internal: batch of {} positions (at most {})", n_tok, n_batch_);
}

int check_seq_runs(std::span<const SeqRun> runs, int n_seq, int n_ctx, int n_batch) {
    int64_t n_tok = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const SeqRun& r = runs[i];
        if (r.seq < 0 || r.seq >= n_seq) throw make_error("sequence {} is not one of the {} this node keeps", r.seq, n_seq);
        if (r.n_tok < 1 || r.pos0 < 0 || static_cast<int64_t>(r.pos0) + r.n_tok > n_ctx) {
            throw make_error("positions {}..{} of sequence {} exceed the context of {}", r.pos0,
                             static_cast<int64_t>(r.pos0) + r.n_tok, r.seq, n_ctx);
        }
        for (size_t j = 0; j < i; ++j) {
            if (runs[j].seq == r.seq) throw make_error("sequence {} appears twice in one batch", r.seq);
        }
        n_tok += r.n_tok;
    }
    if (n_tok < 1 || n_tok > n_batch) throw make_error("internal: batch of {} positions (at most {})", n_tok, n_batch);
    return static_cast<int>(n_tok);
}

void check_compaction(int seq, std::span<const int> kept, int n_used, int n_seq, int n_ctx) {
    if (seq < 0 || seq >= n_seq || n_used > n_ctx || kept.size() > static_cast<size_t>(n_used)) {
        throw make_error("cannot compact sequence {}: {} of {} positions kept (context {}, {} sequences)", seq,
                         kept.size(), n_used, n_ctx, n_seq);
    }
    for (size_t j = 0; j < kept.size(); ++j) {
        if (kept[j] < 0 || kept[j] >= n_used || (j > 0 && kept[j] <= kept[j - 1])) {
            throw make_error("cannot compact sequence {}: kept position {} at {} is not after {} and under {}", seq,
                             kept[j], j, j > 0 ? kept[j - 1] : -1, n_used);
        }
    }
}

int SliceForward::check_runs(std::span<const SeqRun> runs) const {
    return check_seq_runs(runs, n_seq(), n_ctx(), n_batch_);
}

SliceForward::ConvertedActivation& SliceForward::slot_for(const Matrix& m) {
    const QuantType vdt = require_compute_traits(m.type, "matrix").vec_dot_type;
    return converted_[vdt == QuantType::F32 ? 0 : vdt == QuantType::Q8_0 ? 1 : 2];
}

const QuantizedActivation& SliceForward::activation_for(const Matrix& m, const float* h, int64_t n, int n_tok) {
    const QuantType vdt = require_compute_traits(m.type, "matrix").vec_dot_type;
    ConvertedActivation& slot = slot_for(m);
    if (slot.source != h || slot.n_tok != n_tok || slot.act.size() != n || slot.act.type() != vdt) {
        slot.act.quantize(h, n, vdt, n_tok);
        slot.source = h;
        slot.n_tok = n_tok;
    }
    return slot.act;
}

void SliceForward::run_jobs(std::span<const MatmulJob> jobs, const float* h, int64_t n, int n_tok) {
    // Matrices of one input usually share a vec_dot type and run in one
    // parallel loop; a mixed-type file (e.g. Q4_K_M's Q6_K wv) may not.
    const QuantType vdt = require_compute_traits(jobs[0].w->type, "matrix").vec_dot_type;
    const bool same = std::all_of(jobs.begin(), jobs.end(), [&](const MatmulJob& j) {
        return require_compute_traits(j.w->type, "matrix").vec_dot_type == vdt;
    });
    if (same) {
        matmul_many(jobs, activation_for(*jobs[0].w, h, n, n_tok), pool_);
        return;
    }
    for (const MatmulJob& j : jobs) matmul(*j.w, j.rect, activation_for(*j.w, h, n, n_tok), j.y, j.y_stride, pool_);
}

void SliceForward::new_activations() {
    for (ConvertedActivation& c : converted_) c.source = nullptr;
}

void embed_tokens(const Matrix& token_embd, const ModelHParams& hp, std::span<const int32_t> tokens, float* x) {
    for (size_t t = 0; t < tokens.size(); ++t) {
        const int32_t token = tokens[t];
        if (token < 0 || token >= hp.n_vocab) {
            throw make_error("token id {} is outside the vocabulary of {}", token, hp.n_vocab);
        }
        float* xt = x + t * hp.n_embd;
        dequantize_row(token_embd, token, xt);
        if (hp.family->scale_embeddings) {
            const float scale = std::sqrt(static_cast<float>(hp.n_embd));
            for (int64_t j = 0; j < hp.n_embd; ++j) xt[j] *= scale;
        }
    }
}

void SliceForward::embed(std::span<const int32_t> tokens, float* x) const {
    if (!weights_.slice.embeds) throw make_error("internal: this slice does not hold the token embedding");
    embed_tokens(weights_.token_embd, hparams_, tokens, x);
}

void SliceForward::norm_attention_input(int layer, const float* x, float* h, int n_tok) const {
    const int64_t n = hparams_.n_embd;
    for (int t = 0; t < n_tok; ++t) {
        rms_norm(x + t * n, layer_weights(layer).attn_norm.data(), n, hparams_.rms_eps, h + t * n);
    }
}

void SliceForward::norm_ffn_input(int layer, const float* x, float* h, int n_tok) const {
    const int64_t n = hparams_.n_embd;
    for (int t = 0; t < n_tok; ++t) {
        rms_norm(x + t * n, layer_weights(layer).ffn_norm.data(), n, hparams_.rms_eps, h + t * n);
    }
}

void SliceForward::attention_partial(int layer, const float* h, int pos0, int n_tok, double* partial) {
    const SeqRun run{0, pos0, n_tok};
    attention_partial(layer, h, std::span<const SeqRun>(&run, 1), partial);
}

void SliceForward::attention_partial(int layer, const float* h, std::span<const SeqRun> runs, double* partial) {
    const int n_tok = check_runs(runs);
    if (weights_.streamed) weights_.streamed->use(layer);
    const LayerWeights& w = layer_weights(layer);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    const int64_t hd = hparams_.head_dim;
    if (n_q_heads_ == 0) {
        std::fill(partial, partial + n_tok * n_embd, 0.0);
        return;
    }
    new_activations();
    const int64_t kv_begin = static_cast<int64_t>(s.kv_head_begin) * hd;
    const int64_t kv_end = static_cast<int64_t>(s.kv_head_end) * hd;
    const int64_t q_width = static_cast<int64_t>(n_q_heads_) * hd;
    const int64_t kv_width = kv_end - kv_begin;
    const MatmulJob qkv[] = {{&w.wq, {q_begin_, q_begin_ + q_width, 0, n_embd}, q_.data(), q_width},
                             {&w.wk, {kv_begin, kv_end, 0, n_embd}, k_.data(), kv_width},
                             {&w.wv, {kv_begin, kv_end, 0, n_embd}, v_.data(), kv_width}};
    run_jobs(qkv, h, n_embd, n_tok);
    const int local_layer = layer - s.layer_begin;
    new_activations();
    if (runs.size() == 1 && n_tok == 1) {
        attend_one(w, layer, runs[0].seq, runs[0].pos0);
    } else {
        // Long runs attend as a prompt does (tiles over the history). Short
        // ones (decoding sequences of a continuous batch, a speculative
        // verification of a few positions) attend position by position, each
        // exactly as a lone position would: their logits are the bits of
        // decoding them one at a time.
        single_runs_.clear();
        single_rows_.clear();
        int row = 0;
        for (const SeqRun& r : runs) {
            KvCache& cache = caches_[static_cast<size_t>(r.seq)];
            if (r.n_tok <= kRowwiseRows) {
                for (int t = 0; t < r.n_tok; ++t) {
                    single_runs_.push_back({r.seq, r.pos0 + t, 1});
                    single_rows_.push_back(row++);
                }
                continue;
            }
            for (int t = row; t < row + r.n_tok; ++t) {
                const int pos = r.pos0 + (t - row);
                prepare_heads(w, layer, pos, q_.data() + t * q_width, k_.data() + t * kv_width,
                              v_.data() + t * kv_width, 0, s.n_kv_heads());
                cache.store(local_layer, pos, k_.data() + t * kv_width, v_.data() + t * kv_width);
            }
            const AttentionOptions options = attention_options(layer, r.seq);
            if (options.mass != nullptr && layer == s.layer_begin) options.mass->reset(r.pos0, r.n_tok);
            attention_.attend(cache, local_layer, r.pos0, r.n_tok, q_.data() + row * q_width, q_width, n_q_heads_,
                              hparams_.q_per_kv(), attn_.data() + row * q_width, q_width, pool_, options);
            row += r.n_tok;
        }
        if (!single_runs_.empty()) attend_singles(w, layer, single_runs_, single_rows_);
    }
    partial_product(w.wo, n_embd, q_begin_, q_width, activation_for(w.wo, attn_.data(), q_width, n_tok),
                    units_.wo_cols(hparams_), partial);
}

void SliceForward::attention_partial_of(int layer, const float* x, std::span<const SeqRun> runs, double* partial) {
    const int n_tok = check_runs(runs);
    norm_attention_input(layer, x, h_.data(), n_tok);
    attention_partial(layer, h_.data(), runs, partial);
}

void SliceForward::ffn_partial_of(int layer, const float* x, int n_tok, double* partial) {
    check_batch(n_tok);
    norm_ffn_input(layer, x, h_.data(), n_tok);
    ffn_partial(layer, h_.data(), n_tok, partial);
}

void SliceForward::set_partial_bands(int bands, BandSink on_band, int first_band) {
    partial_bands_ = std::max(1, bands);
    on_band_ = std::move(on_band);
    first_band_ = std::max(0, first_band);
}

// Bands of whole 64-row runs: every row block (16), weight group (16) and
// Q8_0 block of the partial (32) lies inside one band, so each row comes out
// as the whole product's and a band rounds as the whole would.
constexpr int64_t kBandQuantum = 64;

int64_t SliceForward::partial_band_count(int64_t n_rows, int bands) {
    return std::max<int64_t>(1, std::min<int64_t>(bands, n_rows / kBandQuantum));
}

int64_t SliceForward::partial_band_end(int64_t n_rows, int64_t count, int64_t b) {
    return b + 1 >= count ? n_rows : (n_rows / kBandQuantum * (b + 1) / count) * kBandQuantum;
}

void SliceForward::partial_product(const Matrix& w, int64_t n_rows, int64_t col_begin, int64_t n_cols,
                                   const QuantizedActivation& x, int64_t unit_cols, double* y) {
    const int64_t bands = on_band_ ? partial_band_count(n_rows, partial_bands_) : 1;
    if (bands <= 1) {
        matmul_units(w, {0, n_rows, col_begin, n_cols}, x, unit_cols, y, n_rows, pool_);
        return;
    }
    for (int64_t k = 0; k < bands; ++k) {
        const int64_t b = (first_band_ + k) % bands;
        const int64_t r0 = b == 0 ? 0 : partial_band_end(n_rows, bands, b - 1);
        const int64_t r1 = partial_band_end(n_rows, bands, b);
        matmul_units(w, {r0, r1, col_begin, n_cols}, x, unit_cols, y + r0, n_rows, pool_);
        on_band_(static_cast<int>(r0), static_cast<int>(r1));
    }
}

void SliceForward::attend_one(const LayerWeights& w, int layer, int seq, int pos) {
    // One region, each thread taking whole KV heads: RoPE of the head's
    // queries and key, its K/V store, its attention, and the conversion of
    // its output for wo, all while the head's rows are in that thread's cache.
    // With RoPE and the stores on the caller alone, then attention, then the
    // conversion, these steps took ~24 us per layer of a 1.1B model at 2
    // threads (every row cold after ~25 MB of weights streamed); as one
    // region, 19-21 us.
    const Matrix& wo = w.wo;
    KvCache& cache = caches_[static_cast<size_t>(seq)];
    const int local_layer = layer - weights_.slice.layer_begin;
    const AttentionOptions options = attention_options(layer, seq);
    // New rows at pos: their attention starts from zero (once, at the slice's first layer).
    if (options.mass != nullptr && layer == weights_.slice.layer_begin) options.mass->reset(pos, 1);
    const int hd = hparams_.head_dim;
    const int q_per_kv = hparams_.q_per_kv();
    const int n_kv = weights_.slice.n_kv_heads();
    const int64_t q_width = static_cast<int64_t>(n_q_heads_) * hd;
    const int64_t head_values = static_cast<int64_t>(q_per_kv) * hd;
    ConvertedActivation& slot = slot_for(wo);
    const QuantType vdt = require_compute_traits(wo.type, "matrix").vec_dot_type;
    // A head's output fills whole activation blocks, or it is converted after.
    const bool by_head = head_values % layout_of(vdt).block_size == 0;
    if (by_head) slot.act.prepare(q_width, vdt, 1);
    rope_of(layer).set_position(pos);  // before the threads read it
    pool_.run([&](int thread, int n_threads) {
        for (int kvh = thread; kvh < n_kv; kvh += n_threads) {
            float* k = k_.data() + static_cast<int64_t>(kvh) * hd;
            prepare_heads(w, layer, pos, q_.data(), k_.data(), v_.data(), kvh, kvh + 1);
            cache.store_head(local_layer, kvh, pos, k, v_.data() + static_cast<int64_t>(kvh) * hd);
            attention_.attend_one_head(cache, local_layer, pos, q_.data(), kvh, q_per_kv, attn_.data(), thread,
                                       options);
            if (by_head) slot.act.quantize_span(attn_.data(), 0, kvh * head_values, (kvh + 1) * head_values);
        }
    });
    if (by_head) {
        slot.source = attn_.data();
        slot.n_tok = 1;
    }
}

void SliceForward::attend_singles(const LayerWeights& w, int layer, std::span<const SeqRun> runs,
                                  std::span<const int> rows) {
    const int local_layer = layer - weights_.slice.layer_begin;
    const AttentionOptions options = attention_options(layer);
    const int64_t hd = hparams_.head_dim;
    const int n_kv = weights_.slice.n_kv_heads();
    const bool first_layer = layer == weights_.slice.layer_begin;
    const int64_t q_width = static_cast<int64_t>(n_q_heads_) * hd;
    const int64_t kv_width = static_cast<int64_t>(n_kv) * hd;
    // RoPE's table holds one position at a time: the rows are prepared here,
    // on one thread (a few microseconds each), before the parallel region.
    for (size_t i = 0; i < runs.size(); ++i) {
        const int t = rows[i];
        prepare_heads(w, layer, runs[i].pos0, q_.data() + t * q_width, k_.data() + t * kv_width,
                      v_.data() + t * kv_width, 0, n_kv);
        caches_[static_cast<size_t>(runs[i].seq)].store(local_layer, runs[i].pos0, k_.data() + t * kv_width,
                                                       v_.data() + t * kv_width);
        if (!masses_.empty() && first_layer) masses_[static_cast<size_t>(runs[i].seq)]->reset(runs[i].pos0, 1);
    }
    const int64_t items = static_cast<int64_t>(runs.size()) * n_kv;
    pool_.run([&](int thread, int n_threads) {
        for (int64_t item = thread; item < items; item += n_threads) {
            const size_t i = static_cast<size_t>(item / n_kv);
            const int kvh = static_cast<int>(item % n_kv);
            const int64_t t = rows[i];
            AttentionOptions own = options;
            if (!masses_.empty()) own.mass = masses_[static_cast<size_t>(runs[i].seq)].get();
            attention_.attend_one_head(caches_[static_cast<size_t>(runs[i].seq)], local_layer, runs[i].pos0,
                                       q_.data() + t * q_width, kvh, hparams_.q_per_kv(), attn_.data() + t * q_width,
                                       thread, own);
        }
    });
}

void SliceForward::ffn_partial(int layer, const float* h, int n_tok, double* partial) {
    check_batch(n_tok);
    if (weights_.streamed) weights_.streamed->use(layer);
    const LayerWeights& w = layer_weights(layer);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    const int64_t n_ffn = s.n_ffn();
    if (n_ffn == 0) {
        std::fill(partial, partial + n_tok * n_embd, 0.0);
        return;
    }
    if (hparams_.has_experts()) {
        moe_ffn_partial(layer, h, n_tok, partial);
        return;
    }
    new_activations();
    const MatmulJob gate_up[] = {{&w.w_gate, {s.ffn_begin, s.ffn_end, 0, n_embd}, gate_.data(), n_ffn},
                                 {&w.w_up, {s.ffn_begin, s.ffn_end, 0, n_embd}, up_.data(), n_ffn}};
    run_jobs(gate_up, h, n_embd, n_tok);
    new_activations();
    partial_product(w.w_down, n_embd, s.ffn_begin, n_ffn, gated_activation(w.w_down, n_ffn, n_tok),
                    units_.ffn_channels, partial);
}

const QuantizedActivation& SliceForward::gated_activation(const Matrix& down, int64_t n_ffn, int n_tok) {
    // gate = swiglu(gate, up) and its conversion for w_down in one pass per
    // chunk of channels, chunks spread over the pool (gate_rows). For one
    // position this is no faster than one thread (~6 us per layer of a 1.1B
    // model either way: cold rows); a prompt's rows (n_tok x n_ffn values) no
    // longer leave the other threads waiting.
    ConvertedActivation& slot = slot_for(down);
    gate_rows(down, gate_.data(), up_.data(), n_ffn, n_tok, nullptr, slot.act);
    slot.source = gate_.data();
    slot.n_tok = n_tok;
    return slot.act;
}

void SliceForward::logits(const float* x, int n_tok, float* logits) {
    check_batch(n_tok);
    if (weights_.slice.vocab_begin != 0 || weights_.slice.vocab_end != hparams_.n_vocab) {
        throw make_error("internal: this slice holds vocab rows [{}, {}), not the whole head", weights_.slice.vocab_begin,
                         weights_.slice.vocab_end);
    }
    norm_output_input(x, norm_.data(), n_tok);
    head_rows(norm_.data(), n_tok, logits, hparams_.n_vocab);
}

void SliceForward::norm_output_input(const float* x, float* h, int n_tok) const {
    check_batch(n_tok);
    if (!weights_.slice.outputs) throw make_error("internal: this slice does not hold the output norm");
    const int64_t n_embd = hparams_.n_embd;
    for (int t = 0; t < n_tok; ++t) {
        rms_norm(x + t * n_embd, weights_.output_norm.data(), n_embd, hparams_.rms_eps, h + t * n_embd);
    }
}

void SliceForward::head_rows(const float* h, int n_tok, float* logits, int64_t stride) {
    check_batch(n_tok);
    const Slice& s = weights_.slice;
    if (s.n_vocab_rows() == 0) throw make_error("internal: this slice holds no rows of the output head");
    const int64_t n_embd = hparams_.n_embd;
    new_activations();
    const Matrix& out = weights_.output;
    matmul(out, {s.vocab_begin, s.vocab_end, 0, n_embd}, activation_for(out, h, n_embd, n_tok), logits, stride, pool_);
    const int64_t rows = s.n_vocab_rows();
    for (int t = 0; t < n_tok; ++t) {
        float* row = logits + t * stride;
        if (!weights_.output_bias.empty()) {
            for (int64_t v = 0; v < rows; ++v) row[v] += weights_.output_bias[static_cast<size_t>(s.vocab_begin + v)];
        }
        if (hparams_.final_soft_cap > 0.0f) soft_cap(row, rows, hparams_.final_soft_cap);
    }
}

}  // namespace tessera
