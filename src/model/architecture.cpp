#include "model/architecture.h"

#include <array>

namespace tessera {

namespace {

// What each family's llama.cpp graph does (llama.cpp src/models/<name>.cpp).
const std::array<Architecture, 8> kArchitectures = {{
    // Llama 1/2/3.x, Mistral, TinyLlama, llama2.c stories, DeepSeek-R1 Llama
    // distills: the reference. RoPE pairs are adjacent (the converter permutes
    // wq/wk); a window only where the file sets one. Mixtral is a llama with
    // experts (softmax, top 2, normalized: as Qwen3-MoE).
    {.name = "llama", .sliding = SlidingLayers::kAll},
    // Qwen 2 / 2.5 (and its R1 distills): biases on Q, K and V.
    {.name = "qwen2", .rope = RopeLayout::kHalves, .writes_qkv_bias = true},
    // Qwen 3: RMSNorm of each Q and K head; head_dim set by key_length.
    {.name = "qwen3", .rope = RopeLayout::kHalves, .writes_qk_norm = true},
    // Qwen3-MoE (30B-A3B, 235B-A22B): Qwen 3's attention, every layer's FFN a
    // mixture of experts: softmax over all of them, the top k, their weights
    // normalized to sum to 1.
    {.name = "qwen3moe", .rope = RopeLayout::kHalves, .writes_qk_norm = true, .writes_experts = true},
    // Gemma 2: GELU gate, scaled embeddings, post-norms, soft caps 50 / 30,
    // every other layer (from the first) a 4096-token window.
    {.name = "gemma2",
     .rope = RopeLayout::kHalves,
     .activation = FfnActivation::kGelu,
     .scale_embeddings = true,
     .reads_attn_soft_cap = true,
     .reads_final_soft_cap = true,
     .default_attn_soft_cap = 50.0f,
     .default_final_soft_cap = 30.0f,
     .sliding = SlidingLayers::kPattern,
     .default_window = 4096,
     .default_window_period = 2,
     .width_scaled_query_layers = 46,
     .writes_post_norms = true},
    // Gemma 3: as Gemma 2 with Q/K norms instead of attention soft-capping,
    // five window layers to one global, local layers on their own RoPE base.
    {.name = "gemma3",
     .rope = RopeLayout::kHalves,
     .activation = FfnActivation::kGelu,
     .scale_embeddings = true,
     .reads_final_soft_cap = true,
     .sliding = SlidingLayers::kPattern,
     .default_window_period = 6,
     .window_needs_key = true,
     .width_scaled_query_layers = 62,
     .own_swa_rope = true,
     .writes_qk_norm = true,
     .writes_post_norms = true},
    // gpt-oss (20b, 120b): biased Q/K/V and output, attention sinks, a
    // 128-token window on every other layer (from the first), YaRN, the FFN's
    // norm under post_attention_norm, experts with biases chosen by the top k
    // router logits and weighted by a softmax of those, the clamped SwiGLU.
    {.name = "gpt-oss",
     .rope = RopeLayout::kHalves,
     .activation = FfnActivation::kSwigluOai,
     .sliding = SlidingLayers::kPattern,
     .default_window = 128,
     .default_window_period = 2,
     .gating = ExpertGating::kSoftmaxWeight,
     .normalize_expert_weights = false,
     .ffn_norm = "post_attention_norm",
     .writes_qkv_bias = true,
     .writes_experts = true,
     .writes_oai_extras = true},
    // Phi-3: fused QKV and gate/up; its sliding window is ignored as
    // llama.cpp does (its converters do not describe it correctly).
    {.name = "phi3", .rope = RopeLayout::kHalves, .writes_fused = true},
}};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
    for (const Architecture& a : kArchitectures) {
        if (a.name == name) return &a;
    }
    return nullptr;
}

std::string supported_architectures() {
    std::string s;
    for (const Architecture& a : kArchitectures) {
        if (!s.empty()) s += ", ";
        s += a.name;
    }
    return s;
}

}  // namespace tessera
