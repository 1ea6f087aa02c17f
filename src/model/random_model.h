// Real-shaped Llama GGUF files with seeded random weights, for speed, memory
// and scale tests of models larger than anything that can be downloaded
// here. Same spec, same bytes. Weight scales keep activations well-behaved
// (matrices have variance 1/cols, norms are 1) so generated text neither
// turns into NaN nor collapses into one repeated token.
#pragma once

#include "ops/quant_type.h"

#include <cstdint>
#include <functional>
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
    float rope_freq_base = 10000.0f;
    uint64_t seed = 1;
};

// Writes the model; throws an Error on an impossible shape or an I/O error.
void write_random_model(const RandomModelSpec& spec, const std::string& path,
                        const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera
