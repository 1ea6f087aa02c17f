#include "model/local_decoder.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

LocalDecoder::LocalDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads)
    : pool_(n_threads),
      forward_(model, full_slice(model.hparams()), config, pool_),
      x_(static_cast<size_t>(forward_.n_batch()) * model.hparams().n_embd),
      logits_(static_cast<size_t>(model.hparams().n_vocab)) {}

void LocalDecoder::run_layers(std::span<const int32_t> tokens, int pos, float* all_logits) {
    if (tokens.empty()) throw make_error("internal: eval of no tokens");
    if (pos < 0 || pos + static_cast<int64_t>(tokens.size()) > n_ctx()) {
        throw make_error("positions {}..{} exceed the context of {} tokens", pos, pos + tokens.size(), n_ctx());
    }
    const ModelHParams& hp = forward_.hparams();
    const size_t n_batch = static_cast<size_t>(forward_.n_batch());
    for (size_t b = 0; b < tokens.size(); b += n_batch) {
        const std::span<const int32_t> batch = tokens.subspan(b, std::min(n_batch, tokens.size() - b));
        const int n_tok = static_cast<int>(batch.size());
        const int pos0 = pos + static_cast<int>(b);
        forward_.embed(batch, x_.data());
        forward_.forward_layers(x_.data(), pos0, n_tok);
        if (all_logits != nullptr) forward_.logits(x_.data(), n_tok, all_logits + b * hp.n_vocab);
    }
}

const float* LocalDecoder::eval(std::span<const int32_t> tokens, int pos) {
    run_layers(tokens, pos, nullptr);
    // Only the last position's logits are needed to pick the next token.
    const size_t last = (tokens.size() - 1) % static_cast<size_t>(forward_.n_batch());
    forward_.logits(x_.data() + last * forward_.hparams().n_embd, 1, logits_.data());
    return logits_.data();
}

const float* LocalDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    all_logits_.resize(tokens.size() * logits_.size());
    run_layers(tokens, pos, all_logits_.data());
    return all_logits_.data();
}

const float* LocalDecoder::eval_seqs(std::span<const SeqEval> evals) {
    const ModelHParams& hp = forward_.hparams();
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    SeqBatches batches(evals, forward_.n_batch());
    seq_logits_.resize(batches.output_rows() * n_vocab);
    while (batches.next(batch_)) {
        forward_.embed(batch_.tokens, x_.data());
        forward_.forward_layers(x_.data(), batch_.runs);
        // The wanted rows' logits in one product (the head streamed once for
        // all of them; each row's bits are those of a product of one).
        if (batch_.rows.empty()) continue;
        batch_.gather_rows(x_.data(), hp.n_embd, last_x_);
        head_out_.resize(batch_.rows.size() * n_vocab);
        forward_.logits(last_x_.data(), static_cast<int>(batch_.rows.size()), head_out_.data());
        batch_.scatter_logits(head_out_.data(), n_vocab, seq_logits_.data());
    }
    return seq_logits_.data();
}

}  // namespace tessera
