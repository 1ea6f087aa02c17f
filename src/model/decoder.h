// What the generation loop needs from a model, wherever it runs: feed tokens
// at positions, get the logits of the last one. A single process implements
// it with LocalDecoder; distributed plans implement it over the network.
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <span>

namespace tessera {

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual const ModelHParams& hparams() const = 0;
    virtual int n_ctx() const = 0;
    // Runs tokens at positions [pos, pos + tokens.size()) and returns the
    // logits (n_vocab floats) of the last one; valid until the next call.
    virtual const float* eval(std::span<const int32_t> tokens, int pos) = 0;
    // Like eval, but returns the logits of every position: tokens.size() rows
    // of n_vocab floats (perplexity and KL divergence need them all); valid
    // until the next call.
    virtual const float* eval_all(std::span<const int32_t> tokens, int pos) = 0;
};

}  // namespace tessera
