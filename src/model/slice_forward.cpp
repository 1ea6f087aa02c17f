#include "model/slice_forward.h"

#include "ops/activation.h"
#include "ops/norm.h"
#include "util/error.h"

#include <algorithm>

namespace tessera {

SliceForward::SliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, ThreadPool& pool)
    : hparams_(model.hparams()),
      weights_(load_slice_weights(model, slice)),
      pool_(pool),
      cache_(slice.n_layers(), slice.n_kv_heads(), hparams_.head_dim, config.n_ctx, config.kv_type),
      attention_(config.n_ctx, pool.size()),
      rope_(hparams_.n_rot, hparams_.rope_freq_base, weights_.rope_freqs),
      n_q_heads_(slice.n_kv_heads() * hparams_.q_per_kv()),
      q_begin_(static_cast<int64_t>(slice.kv_head_begin) * hparams_.q_per_kv() * hparams_.head_dim) {
    const auto hd = static_cast<size_t>(hparams_.head_dim);
    q_.resize(static_cast<size_t>(n_q_heads_) * hd);
    attn_.resize(q_.size());
    k_.resize(static_cast<size_t>(slice.n_kv_heads()) * hd);
    v_.resize(k_.size());
    gate_.resize(static_cast<size_t>(slice.n_ffn()));
    up_.resize(gate_.size());
    norm_.resize(static_cast<size_t>(hparams_.n_embd));
}

const LayerWeights& SliceForward::layer_weights(int layer) const {
    const Slice& s = weights_.slice;
    if (layer < s.layer_begin || layer >= s.layer_end) {
        throw make_error("internal: layer {} is not in this slice ({})", layer, describe_slice(s));
    }
    return weights_.layers[static_cast<size_t>(layer - s.layer_begin)];
}

const QuantizedActivation& SliceForward::activation_for(const Matrix& m, const float* h, int64_t n) {
    const QuantType vdt = require_compute_traits(m.type, "matrix").vec_dot_type;
    ConvertedActivation& slot = vdt == QuantType::F32 ? act_f32_ : act_q8_;
    if (slot.source != h || slot.act.size() != n || slot.act.type() != vdt) {
        slot.act.quantize(h, n, vdt);
        slot.source = h;
    }
    return slot.act;
}

void SliceForward::new_activations() {
    act_f32_.source = nullptr;
    act_q8_.source = nullptr;
}

void SliceForward::embed(int32_t token, float* x) const {
    if (!weights_.slice.embeds) throw make_error("internal: this slice does not hold the token embedding");
    if (token < 0 || token >= hparams_.n_vocab) {
        throw make_error("token id {} is outside the vocabulary of {}", token, hparams_.n_vocab);
    }
    dequantize_row(weights_.token_embd, token, x);
}

void SliceForward::norm_attention_input(int layer, const float* x, float* h) const {
    rms_norm(x, layer_weights(layer).attn_norm.data(), hparams_.n_embd, hparams_.rms_eps, h);
}

void SliceForward::norm_ffn_input(int layer, const float* x, float* h) const {
    rms_norm(x, layer_weights(layer).ffn_norm.data(), hparams_.n_embd, hparams_.rms_eps, h);
}

void SliceForward::attention_partial(int layer, const float* h, int pos, float* partial) {
    const LayerWeights& w = layer_weights(layer);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    const int64_t hd = hparams_.head_dim;
    if (n_q_heads_ == 0) {
        std::fill(partial, partial + n_embd, 0.0f);
        return;
    }
    new_activations();
    const int64_t kv_begin = static_cast<int64_t>(s.kv_head_begin) * hd;
    const int64_t kv_end = static_cast<int64_t>(s.kv_head_end) * hd;
    const int64_t q_end = q_begin_ + static_cast<int64_t>(q_.size());
    matvec(w.wq, {q_begin_, q_end, 0, n_embd}, activation_for(w.wq, h, n_embd), q_.data(), pool_);
    matvec(w.wk, {kv_begin, kv_end, 0, n_embd}, activation_for(w.wk, h, n_embd), k_.data(), pool_);
    matvec(w.wv, {kv_begin, kv_end, 0, n_embd}, activation_for(w.wv, h, n_embd), v_.data(), pool_);
    rope_.set_position(pos);
    rope_.apply(q_.data(), n_q_heads_, static_cast<int>(hd));
    rope_.apply(k_.data(), s.n_kv_heads(), static_cast<int>(hd));
    const int local_layer = layer - s.layer_begin;
    cache_.store(local_layer, pos, k_.data(), v_.data());
    attention_.attend(cache_, local_layer, pos + 1, q_.data(), n_q_heads_, hparams_.q_per_kv(), attn_.data(), pool_);
    new_activations();
    const auto n_attn = static_cast<int64_t>(attn_.size());
    matvec(w.wo, {0, n_embd, q_begin_, n_attn}, activation_for(w.wo, attn_.data(), n_attn), partial, pool_);
}

void SliceForward::ffn_partial(int layer, const float* h, float* partial) {
    const LayerWeights& w = layer_weights(layer);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    if (s.n_ffn() == 0) {
        std::fill(partial, partial + n_embd, 0.0f);
        return;
    }
    new_activations();
    matvec(w.w_gate, {s.ffn_begin, s.ffn_end, 0, n_embd}, activation_for(w.w_gate, h, n_embd), gate_.data(), pool_);
    matvec(w.w_up, {s.ffn_begin, s.ffn_end, 0, n_embd}, activation_for(w.w_up, h, n_embd), up_.data(), pool_);
    swiglu(gate_.data(), up_.data(), s.n_ffn());
    new_activations();
    matvec(w.w_down, {0, n_embd, s.ffn_begin, s.n_ffn()}, activation_for(w.w_down, gate_.data(), s.n_ffn()), partial,
           pool_);
}

void SliceForward::logits(const float* x, float* logits) {
    if (!weights_.slice.outputs) throw make_error("internal: this slice does not hold the output head");
    rms_norm(x, weights_.output_norm.data(), hparams_.n_embd, hparams_.rms_eps, norm_.data());
    new_activations();
    matvec(weights_.output, activation_for(weights_.output, norm_.data(), hparams_.n_embd), logits, pool_);
}

}  // namespace tessera
