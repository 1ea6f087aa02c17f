#include "model/hparams.h"

#include "model/gguf_file.h"
#include "util/error.h"

#include <cmath>

namespace tessera {

namespace {

// Bounds far beyond any real model, so a corrupt value is refused before it sizes a buffer.
constexpr int64_t kMaxWidth = 1 << 18;
constexpr int64_t kMaxLayers = 1 << 12;
constexpr int64_t kMaxHeads = 1 << 12;
constexpr int64_t kMaxContext = 1 << 24;
constexpr int64_t kMaxExperts = 1 << 10;

int32_t read_bounded(const GgufFile& file, const std::string& key, int64_t lo, int64_t hi) {
    const int64_t v = file.get_int(key);
    if (v < lo || v > hi) throw make_error("{}: metadata '{}' = {} is out of range [{}, {}]", file.path(), key, v, lo, hi);
    return static_cast<int32_t>(v);
}

}  // namespace

ModelHParams read_hparams(const GgufFile& file) {
    ModelHParams hp;
    hp.arch = file.get_string("general.architecture");
    hp.family = find_architecture(hp.arch);
    if (hp.family == nullptr) {
        throw make_error("{}: architecture '{}' is not supported (supported: {})", file.path(), hp.arch,
                         supported_architectures());
    }
    const Architecture& family = *hp.family;
    const std::string p = hp.arch + ".";
    hp.n_embd = read_bounded(file, p + "embedding_length", 1, kMaxWidth);
    hp.n_layer = read_bounded(file, p + "block_count", 1, kMaxLayers);
    hp.n_head = read_bounded(file, p + "attention.head_count", 1, kMaxHeads);
    hp.n_head_kv = file.find_int(p + "attention.head_count_kv") ? read_bounded(file, p + "attention.head_count_kv", 1, kMaxHeads)
                                                                 : hp.n_head;
    hp.n_ff = read_bounded(file, p + "feed_forward_length", 1, kMaxWidth * 8);
    hp.n_ctx_train = read_bounded(file, p + "context_length", 1, kMaxContext);
    // Experts: each as wide as expert_feed_forward_length where the file says
    // (Qwen3-MoE), else as the FFN (Mixtral); every layer has them.
    if (file.find_int(p + "expert_count") && *file.find_int(p + "expert_count") > 0) {
        hp.n_expert = read_bounded(file, p + "expert_count", 1, kMaxExperts);
        hp.n_expert_used = read_bounded(file, p + "expert_used_count", 1, hp.n_expert);
        if (file.find_int(p + "expert_feed_forward_length")) {
            hp.n_ff = read_bounded(file, p + "expert_feed_forward_length", 1, kMaxWidth * 8);
        }
        if (file.find_int(p + "expert_shared_count") && *file.find_int(p + "expert_shared_count") > 0) {
            throw make_error("{}: shared experts (expert_shared_count) are not supported", file.path());
        }
    } else if (family.writes_experts) {
        throw make_error("{}: metadata '{}expert_count' is missing ({} is a mixture of experts)", file.path(), p, hp.arch);
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        throw make_error("{}: head count {} is not a multiple of the KV head count {}", file.path(), hp.n_head, hp.n_head_kv);
    }
    // Heads are n_embd / n_head wide unless key_length says otherwise (Qwen 3
    // and Gemma have wider ones); values must be as wide as keys.
    if (file.find_int(p + "attention.key_length")) {
        hp.head_dim = read_bounded(file, p + "attention.key_length", 2, kMaxWidth);
    } else {
        if (hp.n_embd % hp.n_head != 0) {
            throw make_error("{}: embedding length {} is not a multiple of the head count {}", file.path(), hp.n_embd,
                             hp.n_head);
        }
        hp.head_dim = hp.n_embd / hp.n_head;
    }
    if (const auto value_length = file.find_int(p + "attention.value_length"); value_length && *value_length != hp.head_dim) {
        throw make_error("{}: attention.value_length {} differs from key_length {} (not supported)", file.path(),
                         *value_length, hp.head_dim);
    }
    if (hp.q_dim() > kMaxWidth * 8) throw make_error("{}: {} heads of {} are too wide", file.path(), hp.n_head, hp.head_dim);
    hp.n_rot = file.find_int(p + "rope.dimension_count") ? read_bounded(file, p + "rope.dimension_count", 2, hp.head_dim)
                                                          : hp.head_dim;
    if (hp.n_rot % 2 != 0) throw make_error("{}: rope.dimension_count {} is odd", file.path(), hp.n_rot);
    hp.rope_freq_base = static_cast<float>(file.find_float(p + "rope.freq_base").value_or(10000.0));
    if (!(std::isfinite(hp.rope_freq_base) && hp.rope_freq_base > 1.0f)) {
        throw make_error("{}: rope.freq_base {} is not a usable base", file.path(), hp.rope_freq_base);
    }
    const auto positive_float = [&](const std::string& key, float fallback) {
        const float v = static_cast<float>(file.find_float(key).value_or(fallback));
        if (!(std::isfinite(v) && v >= 0.0f)) throw make_error("{}: {} = {} is not a usable value", file.path(), key, v);
        return v;
    };
    const std::string scaling = file.find_string(p + "rope.scaling.type").value_or("linear");
    if (scaling != "linear" && scaling != "none" && scaling != "yarn") {
        throw make_error("{}: rope scaling '{}' is not supported (supported: none, linear, yarn; Llama 3.1's scaling "
                         "comes as rope_freqs)", file.path(), scaling);
    }
    if (scaling == "linear" || scaling == "yarn") {
        const float factor = positive_float(p + "rope.scaling.factor", 0.0f);
        hp.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    }
    if (scaling == "yarn" && hp.rope_freq_scale < 1.0f) {
        // YaRN as llama.cpp runs it (llama-context.cpp: its attention factor
        // cancels out, leaving ggml's 1 + 0.1 ln(factor) times attn_factor).
        if (positive_float(p + "rope.scaling.yarn_log_multiplier", 0.0f) != 0.0f) {
            throw make_error("{}: YaRN with a log multiplier (DeepSeek's) is not supported", file.path());
        }
        hp.yarn.orig_ctx = file.find_int(p + "rope.scaling.original_context_length")
                               ? read_bounded(file, p + "rope.scaling.original_context_length", 1, kMaxContext)
                               : hp.n_ctx_train;
        hp.yarn.ext_factor = positive_float(p + "rope.scaling.yarn_ext_factor", 1.0f);
        hp.yarn.attn_factor = positive_float(p + "rope.scaling.attn_factor", 1.0f);
        hp.yarn.beta_fast = positive_float(p + "rope.scaling.yarn_beta_fast", 32.0f);
        hp.yarn.beta_slow = positive_float(p + "rope.scaling.yarn_beta_slow", 1.0f);
    }
    hp.rope_freq_base_swa = hp.rope_freq_base;
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
    if (family.own_swa_rope) {
        hp.rope_freq_base_swa = positive_float(p + "rope.freq_base_swa", 10000.0f);
        hp.rope_freq_scale_swa = 1.0f;
        if (!(hp.rope_freq_base_swa > 1.0f)) throw make_error("{}: rope.freq_base_swa is not a usable base", file.path());
    }
    if (family.reads_attn_soft_cap) hp.attn_soft_cap = positive_float(p + "attn_logit_softcapping", family.default_attn_soft_cap);
    if (family.reads_final_soft_cap) {
        hp.final_soft_cap = positive_float(p + "final_logit_softcapping", family.default_final_soft_cap);
    }
    if (family.sliding != SlidingLayers::kNone) {
        const bool has_window = file.find_int(p + "attention.sliding_window").has_value();
        if (has_window || !family.window_needs_key) {
            hp.sliding_window = has_window ? read_bounded(file, p + "attention.sliding_window", 0, kMaxContext)
                                           : family.default_window;
        }
        if (family.sliding == SlidingLayers::kPattern) {
            hp.window_period = file.find_int(p + "attention.sliding_window_pattern")
                                   ? read_bounded(file, p + "attention.sliding_window_pattern", 0, kMaxLayers)
                                   : family.default_window_period;
        }
    }
    if (family.width_scaled_query_layers != 0 && hp.n_layer == family.width_scaled_query_layers) {
        hp.query_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head));
    }
    hp.rms_eps = static_cast<float>(file.find_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
    if (!(std::isfinite(hp.rms_eps) && hp.rms_eps > 0.0f && hp.rms_eps < 1.0f)) {
        throw make_error("{}: attention.layer_norm_rms_epsilon {} is not in (0, 1)", file.path(), hp.rms_eps);
    }
    const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
    if (embd == nullptr && file.find_int("tessera.slice.n_vocab")) {
        // A slice file (a worker's share) has no embedding: it records the size.
        const int64_t n_vocab = *file.find_int("tessera.slice.n_vocab");
        if (n_vocab < 1 || n_vocab > INT32_MAX) throw make_error("{}: tessera.slice.n_vocab {} is invalid", file.path(), n_vocab);
        hp.n_vocab = static_cast<int32_t>(n_vocab);
    } else {
        if (embd == nullptr) throw make_error("{}: tensor 'token_embd.weight' is missing", file.path());
        if (embd->n_dims != 2 || embd->ne[0] != hp.n_embd || embd->ne[1] < 1 || embd->ne[1] > INT32_MAX) {
            throw make_error("{}: tensor 'token_embd.weight' has shape [{}, {}], expected [{}, n_vocab]", file.path(),
                             embd->ne[0], embd->ne[1], hp.n_embd);
        }
        hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
    }
    return hp;
}

bool ModelHParams::is_sliding(int il) const {
    if (sliding_window <= 0 || family == nullptr) return false;
    if (family->sliding == SlidingLayers::kAll) return true;
    return window_period == 0 || il % window_period < window_period - 1;
}

float ModelHParams::rope_base_of(int il) const { return is_sliding(il) ? rope_freq_base_swa : rope_freq_base; }
float ModelHParams::rope_scale_of(int il) const { return is_sliding(il) ? rope_freq_scale_swa : rope_freq_scale; }

}  // namespace tessera
