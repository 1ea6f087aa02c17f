#include "model/local_decoder.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

LocalDecoder::LocalDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads)
    : pool_(n_threads),
      forward_(model, full_slice(model.hparams()), config, pool_),
      x_(static_cast<size_t>(model.hparams().n_embd)),
      h_(x_.size()),
      partial_(x_.size()),
      logits_(static_cast<size_t>(model.hparams().n_vocab)) {}

const float* LocalDecoder::eval(std::span<const int32_t> tokens, int pos) {
    if (tokens.empty()) throw make_error("internal: eval of no tokens");
    if (pos < 0 || pos + static_cast<int64_t>(tokens.size()) > n_ctx()) {
        throw make_error("positions {}..{} exceed the context of {} tokens", pos, pos + tokens.size(), n_ctx());
    }
    const ModelHParams& hp = forward_.hparams();
    for (size_t i = 0; i < tokens.size(); ++i) {
        const int p = pos + static_cast<int>(i);
        forward_.embed(tokens[i], x_.data());
        for (int layer = 0; layer < hp.n_layer; ++layer) {
            forward_.norm_attention_input(layer, x_.data(), h_.data());
            forward_.attention_partial(layer, h_.data(), p, partial_.data());
            for (int j = 0; j < hp.n_embd; ++j) x_[j] += partial_[j];
            forward_.norm_ffn_input(layer, x_.data(), h_.data());
            forward_.ffn_partial(layer, h_.data(), partial_.data());
            for (int j = 0; j < hp.n_embd; ++j) x_[j] += partial_[j];
        }
    }
    // Only the last position's logits are needed to pick the next token.
    forward_.logits(x_.data(), logits_.data());
    return logits_.data();
}

const float* LocalDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    const size_t n_vocab = logits_.size();
    all_logits_.resize(tokens.size() * n_vocab);
    for (size_t i = 0; i < tokens.size(); ++i) {
        const float* logits = eval(tokens.subspan(i, 1), pos + static_cast<int>(i));
        std::copy(logits, logits + n_vocab, all_logits_.begin() + static_cast<std::ptrdiff_t>(i * n_vocab));
    }
    return all_logits_.data();
}

}  // namespace tessera
