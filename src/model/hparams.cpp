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

int32_t read_bounded(const GgufFile& file, const std::string& key, int64_t lo, int64_t hi) {
    const int64_t v = file.get_int(key);
    if (v < lo || v > hi) throw make_error("{}: metadata '{}' = {} is out of range [{}, {}]", file.path(), key, v, lo, hi);
    return static_cast<int32_t>(v);
}

}  // namespace

ModelHParams read_hparams(const GgufFile& file) {
    ModelHParams hp;
    hp.arch = file.get_string("general.architecture");
    if (hp.arch != "llama") {
        throw make_error("{}: architecture '{}' is not supported (supported: llama, which covers Llama 1/2/3, Mistral, "
                         "TinyLlama and llama2.c models)",
                         file.path(), hp.arch);
    }
    const std::string p = hp.arch + ".";
    hp.n_embd = read_bounded(file, p + "embedding_length", 1, kMaxWidth);
    hp.n_layer = read_bounded(file, p + "block_count", 1, kMaxLayers);
    hp.n_head = read_bounded(file, p + "attention.head_count", 1, kMaxHeads);
    hp.n_head_kv = file.find_int(p + "attention.head_count_kv") ? read_bounded(file, p + "attention.head_count_kv", 1, kMaxHeads)
                                                                 : hp.n_head;
    hp.n_ff = read_bounded(file, p + "feed_forward_length", 1, kMaxWidth * 8);
    hp.n_ctx_train = read_bounded(file, p + "context_length", 1, kMaxContext);
    if (hp.n_embd % hp.n_head != 0) {
        throw make_error("{}: embedding length {} is not a multiple of the head count {}", file.path(), hp.n_embd, hp.n_head);
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        throw make_error("{}: head count {} is not a multiple of the KV head count {}", file.path(), hp.n_head, hp.n_head_kv);
    }
    hp.head_dim = hp.n_embd / hp.n_head;
    if (const auto key_length = file.find_int(p + "attention.key_length"); key_length && *key_length != hp.head_dim) {
        throw make_error("{}: attention.key_length {} differs from embedding/heads = {} (not supported)", file.path(),
                         *key_length, hp.head_dim);
    }
    hp.n_rot = file.find_int(p + "rope.dimension_count") ? read_bounded(file, p + "rope.dimension_count", 2, hp.head_dim)
                                                          : hp.head_dim;
    if (hp.n_rot % 2 != 0) throw make_error("{}: rope.dimension_count {} is odd", file.path(), hp.n_rot);
    hp.rope_freq_base = static_cast<float>(file.find_float(p + "rope.freq_base").value_or(10000.0));
    if (!(std::isfinite(hp.rope_freq_base) && hp.rope_freq_base > 1.0f)) {
        throw make_error("{}: rope.freq_base {} is not a usable base", file.path(), hp.rope_freq_base);
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

}  // namespace tessera
