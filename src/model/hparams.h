// Hyper-parameters of a Llama-family model (Llama 1/2/3, Mistral, TinyLlama,
// llama2.c stories), read from GGUF metadata under the "<arch>." prefix and
// checked for consistency before any buffer is sized from them.
#pragma once

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
    int32_t n_ff = 0;       // FFN hidden width
    int32_t n_ctx_train = 0;
    int32_t head_dim = 0;
    int32_t n_rot = 0;      // leading elements of a head that RoPE rotates
    float rope_freq_base = 10000.0f;
    float rms_eps = 1e-5f;

    int32_t q_per_kv() const { return n_head / n_head_kv; }
    int32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters; n_vocab comes from the token
// embedding tensor. Throws an Error naming the file and the offending key.
ModelHParams read_hparams(const GgufFile& file);

}  // namespace tessera
