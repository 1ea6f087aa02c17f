#include "model/local_decoder.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

LocalDecoder::LocalDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads)
    : pool_(n_threads),
      forward_(model, full_slice(model.hparams()), config, pool_) {}

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

const float* LocalDecoder::eval_seqs(std::span<const SeqEval> evals) { return eval_whole_model(forward_, evals, scratch_); }

}  // namespace tessera
