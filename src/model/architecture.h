// The model families Tessera runs, each described in one place: what its
// forward pass does differently from Llama's and which metadata keys and
// tensors say so. The forward pass (slice_forward) reads these fields and the
// tensors a file holds; nothing else asks which architecture a file is.
//
// What every family shares: token embedding -> per layer [RMSNorm ->
// attention (RoPE, grouped-query) -> residual add; RMSNorm -> gated FFN ->
// residual add] -> RMSNorm -> output head (tied to the embedding when the file
// has no output.weight). Tensors every family may hold, found by name:
//   blk.N.attn_qkv.weight        Q, K and V rows in one matrix (Phi-3)
//   blk.N.attn_{q,k,v}.bias      biases of the projections (Qwen 2)
//   blk.N.attn_{q,k}_norm.weight RMSNorm of each head before RoPE (Qwen 3, Gemma 3)
//   blk.N.post_attention_norm / post_ffw_norm.weight   RMSNorm of each block's
//                                output before the residual add (Gemma 2, 3)
//   blk.N.ffn_up.weight of 2 n_ff rows without ffn_gate: gate rows, then up (Phi-3)
//   rope_freqs.weight            per-pair RoPE frequency divisors (Llama 3.1+)
//   output.bias                  a bias on the logits
// A mixture of experts ("<arch>.expert_count" > 0: Qwen3-MoE, Mixtral as
// llama) replaces the FFN's three matrices by a router and the experts':
//   blk.N.ffn_gate_inp.weight    [n_embd, n_expert]: the router's logits
//   blk.N.ffn_{gate,up}_exps.weight  [n_embd, n_ff_exp, n_expert]
//   blk.N.ffn_down_exps.weight   [n_ff_exp, n_embd, n_expert]
//   blk.N.ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias   biases of the
//                                router and of each expert's products (gpt-oss)
// and gpt-oss adds:
//   blk.N.attn_output.bias       a bias on the attention output
//   blk.N.attn_sinks.weight      a logit per query head that joins each
//                                softmax's denominator (attention sinks)
#pragma once

#include "ops/activation.h"
#include "ops/rope.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// Which layers attend through a sliding window ("<arch>.attention.sliding_window").
// How a mixture of experts' router turns its logits into the chosen experts
// and their weights (llama.cpp's llama_expert_gating_func_type).
enum class ExpertGating : uint8_t {
    kSoftmax,        // softmax over every expert, the top k of it (Qwen3-MoE, Mixtral)
    kSoftmaxWeight,  // the top k logits, a softmax over those k (gpt-oss)
};

enum class SlidingLayers : uint8_t {
    kNone,     // none, whatever the file says (llama.cpp ignores Phi-3's window; so do we)
    kAll,      // every layer, when the file sets a window (Mistral)
    kPattern,  // all but the last of every `period` layers ("<arch>.attention.sliding_window_pattern")
};

struct Architecture {
    std::string_view name;  // general.architecture
    RopeLayout rope = RopeLayout::kAdjacent;
    FfnActivation activation = FfnActivation::kSilu;
    bool scale_embeddings = false;  // x = embedding * sqrt(n_embd) (Gemma)
    // Soft caps ("<arch>.attn_logit_softcapping", "<arch>.final_logit_softcapping"),
    // read only by the families that apply them; these defaults otherwise.
    bool reads_attn_soft_cap = false;   // Gemma 2
    bool reads_final_soft_cap = false;  // Gemma 2, 3
    float default_attn_soft_cap = 0.0f;
    float default_final_soft_cap = 0.0f;
    SlidingLayers sliding = SlidingLayers::kNone;
    int32_t default_window = 0;          // the window when the file sets none (0: no window)
    int32_t default_window_period = 0;   // kPattern's period when the file sets none
    bool window_needs_key = false;       // a window only when the file sets one (Gemma 3)
    // Gemma scales queries by 1/sqrt(n_embd / n_head) in its 27B models (told
    // apart by layer count, as llama.cpp does) and by 1/sqrt(head_dim) in the
    // others; 0 means always 1/sqrt(head_dim).
    int32_t width_scaled_query_layers = 0;
    // Sliding layers' RoPE: their own base ("<arch>.rope.freq_base_swa") and
    // no linear scaling (Gemma 3's local layers); otherwise they use the
    // global base and scale like every layer.
    bool own_swa_rope = false;
    // Mixtures of experts: the router's gating and whether the chosen
    // experts' weights are divided by their sum (llama.cpp's norm_w).
    ExpertGating gating = ExpertGating::kSoftmax;
    bool normalize_expert_weights = true;
    // The FFN's input norm: "ffn_norm", or gpt-oss's "post_attention_norm"
    // (blk.N.<name>.weight).
    std::string_view ffn_norm = "ffn_norm";
    // Tensors gen-model writes for this family (and that a file may hold).
    bool writes_qkv_bias = false;
    bool writes_qk_norm = false;
    bool writes_post_norms = false;
    bool writes_fused = false;  // attn_qkv and a fused gate/up
    bool writes_experts = false;  // a router and experts instead of the FFN (qwen3moe)
    bool writes_oai_extras = false;  // gpt-oss: attention sinks, output and expert biases
};

// The architecture named `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);

// The names of every supported architecture, for messages: "llama, qwen2, ...".
std::string supported_architectures();

}  // namespace tessera
