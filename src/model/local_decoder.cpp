#include "model/local_decoder.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

LocalDecoder::LocalDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads)
    : pool_(n_threads),
      forward_(model, full_slice(model.hparams()), config, pool_),
      x_(static_cast<size_t>(forward_.n_batch()) * model.hparams().n_embd) {}

// eval and eval_all are one sequence's eval_seqs: the same batches of
// n_batch positions, the same products.
const float* LocalDecoder::eval(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, false};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
}

const float* LocalDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, true};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
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
