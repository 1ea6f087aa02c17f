// Real-shaped GGUF files with seeded random weights, for speed, memory and
// scale tests of models larger than anything that can be downloaded here,
// and for checking each family (model/architecture.h) against llama.cpp with
// llama.cpp's own tensor names and keys. Same spec, same bytes. Weight scales
// keep activations well-behaved (matrices have variance 1/cols, norms are 1,
// or near 1 with random_norms) so generated text neither turns into NaN nor
// collapses into one repeated token.
#pragma once

#include "ops/quant_type.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace tessera {

struct RandomModelSpec {
    int32_t n_embd = 256;
    int32_t n_layer = 2;
    int32_t n_head = 8;
    int32_t n_head_kv = 8;
    int32_t n_ff = 768;
    int32_t n_ctx = 2048;
    int32_t n_vocab = 512;       // used only without vocab_from
    std::string vocab_from;      // GGUF file whose tokenizer.* metadata is copied
    QuantType type = QuantType::F32;  // type of the 2-D weights; norms stay F32
    // A mixture of experts' other matrices (attention, embeddings, head) in
    // this type instead, the experts in `type`: gpt-oss ships MXFP4 experts
    // beside Q8_0 matrices (llama-quantize's MXFP4_MOE).
    std::optional<QuantType> dense_type;
    // Every weight zero, the file sparse (GgufWriter::set_zero_data): the
    // real shape for planning a model too large to generate here.
    bool zero_weights = false;
    float rope_freq_base = 10000.0f;
    uint64_t seed = 1;
    // The family and what its files hold (model/architecture.h decides which
    // extra tensors and keys are written).
    std::string arch = "llama";
    int32_t head_dim = 0;           // 0: n_embd / n_head; else written as attention.key_length
    bool tied_output = false;       // no output.weight: the head is the embedding
    bool rope_freqs = false;        // a rope_freqs tensor (Llama 3.1's long-context RoPE)
    int32_t sliding_window = 0;     // written as attention.sliding_window when > 0
    float rope_scale_factor = 0.0f; // written as linear rope scaling when > 0
    float rope_freq_base_swa = 0.0f;  // written as rope.freq_base_swa when > 0
    float yarn_factor = 0.0f;       // written as YaRN rope scaling when > 0,
    int32_t yarn_orig_ctx = 0;      // over this training context
    bool random_norms = false;      // norm weights near 1 rather than 1, biases random
    // A mixture of experts (n_expert > 0): every layer's FFN is a router and
    // n_expert experts of n_ff channels, n_expert_used chosen per token.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
};

// Presets named like the models they imitate: a family name (llama, qwen2,
// qwen3, qwen3moe, gpt-oss, gemma2, gemma3, phi3) or llama3 (rope_freqs, tied head,
// base 500000), mistral (a sliding window) and mixtral (llama with 8 experts,
// 2 used), each with the options its real files have and windows short enough
// to matter in a test; a mixture of experts' preset sets n_expert and
// n_expert_used only where they are 0. Throws on an unknown name.
void apply_model_preset(RandomModelSpec& spec, const std::string& name);
// The preset names, for help text.
std::string model_preset_names();

// Writes the model; throws an Error on an impossible shape or an I/O error.
void write_random_model(const RandomModelSpec& spec, const std::string& path,
                        const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera
