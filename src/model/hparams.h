// Hyper-parameters of a model of one of the families in model/architecture.h,
// read from GGUF metadata under the "<arch>." prefix and checked for
// consistency before any buffer is sized from them.
#pragma once

#include "model/architecture.h"

#include <cstdint>
#include <string>

namespace tessera {

class GgufFile;

struct ModelHParams {
    std::string arch;
    int32_t n_vocab = 0;
    int32_t n_embd = 0;     // model width (dim)
    int32_t n_layer = 0;
    int32_t n_head = 0;     // query heads
    int32_t n_head_kv = 0;  // key/value heads (GQA when < n_head)
    int32_t n_ff = 0;       // FFN hidden width; with experts, each expert's
    // Mixture of experts (model/architecture.h): experts per layer and chosen
    // per token; 0 for a dense model.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ctx_train = 0;
    int32_t head_dim = 0;   // attention.key_length, else n_embd / n_head
    int32_t n_rot = 0;      // leading elements of a head that RoPE rotates
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // linear or YaRN rope scaling: 1 / rope.scaling.factor
    RopeYarn yarn;                 // YaRN's parameters (orig_ctx 0: no YaRN)
    float rms_eps = 1e-5f;

    // What the family does beyond Llama (model/architecture.h), resolved
    // against the file's keys.
    const Architecture* family = nullptr;
    float query_scale = 0.0f;      // attention score scale; 0: 1 / sqrt(head_dim)
    float attn_soft_cap = 0.0f;    // 0: none
    float final_soft_cap = 0.0f;   // 0: none
    int32_t sliding_window = 0;    // 0: none
    int32_t window_period = 0;     // SlidingLayers::kPattern's period
    float rope_freq_base_swa = 10000.0f;  // sliding layers' RoPE when family->own_swa_rope
    float rope_freq_scale_swa = 1.0f;

    bool has_experts() const { return n_expert > 0; }
    int32_t q_per_kv() const { return n_head / n_head_kv; }
    int32_t kv_dim() const { return n_head_kv * head_dim; }
    int64_t q_dim() const { return static_cast<int64_t>(n_head) * head_dim; }
    // Whether layer `il` attends through the sliding window.
    bool is_sliding(int il) const;
    // The RoPE base and linear scale of layer `il`.
    float rope_base_of(int il) const;
    float rope_scale_of(int il) const;
};

// Reads and validates the hyper-parameters; n_vocab comes from the token
// embedding tensor. Throws an Error naming the file and the offending key.
ModelHParams read_hparams(const GgufFile& file);

}  // namespace tessera
