// The forward pass of one slice, written once and used by every deployment.
// Each step is a plain function of its inputs: embed a token, normalize the
// residual for a layer's attention or FFN, compute this slice's *partial* of
// the attention or FFN output, and the logits. A driver sums the partials
// into the residual: a single node adds its one partial directly, a
// tensor-parallel group reduces the partials of its ranks first.
//
// Named intermediates (per position): x (residual), h (normed input), q/k/v
// (own heads), attn (own heads' attention output), gate/up (own channels),
// partial (n_embd, this slice's share of wo·attn or w_down·ffn).
#pragma once

#include "attn/dense_attention.h"
#include "attn/kv_cache.h"
#include "model/llama_model.h"
#include "ops/matvec.h"
#include "ops/rope.h"
#include "util/thread_pool.h"

#include <vector>

namespace tessera {

struct ForwardConfig {
    int n_ctx = 0;
    QuantType kv_type = QuantType::F16;
};

class SliceForward {
public:
    SliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, ThreadPool& pool);

    const ModelHParams& hparams() const { return hparams_; }
    const Slice& slice() const { return weights_.slice; }
    const KvCache& kv_cache() const { return cache_; }
    int n_ctx() const { return cache_.n_ctx(); }

    // x = embedding of token (needs slice.embeds).
    void embed(int32_t token, float* x) const;
    // h = rmsnorm(x) with the layer's attention / FFN norm weights.
    void norm_attention_input(int layer, const float* x, float* h) const;
    void norm_ffn_input(int layer, const float* x, float* h) const;
    // partial = this slice's share of the layer's attention output for position
    // pos, given its normed input h; stores the slice's K/V for pos.
    void attention_partial(int layer, const float* h, int pos, float* partial);
    // partial = this slice's share of the layer's FFN output.
    void ffn_partial(int layer, const float* h, float* partial);
    // logits = output · rmsnorm(x) (needs slice.outputs).
    void logits(const float* x, float* logits);

private:
    const LayerWeights& layer_weights(int layer) const;
    // The activation h converted to the vec_dot type a matrix needs; each
    // input is converted once per type even when several matrices read it.
    const QuantizedActivation& activation_for(const Matrix& m, const float* h, int64_t n);
    // Forgets converted activations (their source buffers get new contents).
    void new_activations();

    ModelHParams hparams_;
    SliceWeights weights_;
    ThreadPool& pool_;
    KvCache cache_;
    DenseAttention attention_;
    RopeTable rope_;
    int32_t n_q_heads_;  // query heads of this slice
    int64_t q_begin_;    // first query row/column of this slice
    // Scratch, sized once so the token loop does not allocate.
    std::vector<float> q_, k_, v_, attn_, gate_, up_, norm_;
    struct ConvertedActivation {
        QuantizedActivation act;
        const float* source = nullptr;
    };
    ConvertedActivation act_f32_, act_q8_;
};

}  // namespace tessera
