// Cuts a multi-sequence eval (Decoder::eval_seqs) into batches of at most
// n_batch rows: each sequence's next tokens in order, so a long prompt spans
// several batches beside the other sequences. Every decoder that batches
// sequences (a single node, a tensor-parallel root) runs its batches alike.
#pragma once

#include "model/decoder.h"
#include "model/layer_block.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct SeqBatch {
    std::vector<SeqRun> runs;     // an eval with `all` gives runs with all_logits
    std::vector<int32_t> tokens;  // the runs' tokens, row by row
    std::vector<int> rows;        // the batch rows whose logits are wanted
    std::vector<size_t> dest;     // and the output row of eval_seqs each goes to

    // The wanted rows of x (n_embd floats each), back to back in out.
    void gather_rows(const float* x, int64_t n_embd, std::vector<float>& out) const;
    // Row f of logits (n_vocab floats each) to row dest[f] of all.
    void scatter_logits(const float* logits, size_t n_vocab, float* all) const;
};

class SeqBatches {
public:
    // Checks every eval has tokens.
    SeqBatches(std::span<const SeqEval> evals, int n_batch);
    // The next batch into b; false when every token has been taken.
    bool next(SeqBatch& b);
    // Rows of eval_seqs's output: one per eval, or its token count with `all`.
    size_t output_rows() const { return output_rows_; }

private:
    std::span<const SeqEval> evals_;
    size_t n_batch_;
    std::vector<size_t> done_;
    std::vector<size_t> first_row_;  // each eval's first output row
    size_t output_rows_ = 0;
};

// One process's eval_seqs over a forward pass holding the whole model (a
// SliceForward, a GPU's): batch by batch, embed, run the layers, and the
// wanted rows' logits in one product (the head streamed once for all of
// them; each row's bits are those of a product of one). Returns the rows of
// n_vocab logits, in `logits`; x, rows and out are scratch.
struct WholeModelScratch {
    std::vector<float> x, logits, rows, out;
    SeqBatch batch;
};
template <class Forward>
const float* eval_whole_model(Forward& forward, std::span<const SeqEval> evals, WholeModelScratch& s) {
    const ModelHParams& hp = forward.hparams();
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    s.x.resize(static_cast<size_t>(forward.n_batch()) * static_cast<size_t>(hp.n_embd));
    SeqBatches batches(evals, forward.n_batch());
    s.logits.resize(batches.output_rows() * n_vocab);
    while (batches.next(s.batch)) {
        forward.embed(s.batch.tokens, s.x.data());
        forward.forward_layers(s.x.data(), s.batch.runs);
        if (s.batch.rows.empty()) continue;
        s.batch.gather_rows(s.x.data(), hp.n_embd, s.rows);
        s.out.resize(s.batch.rows.size() * n_vocab);
        forward.logits(s.rows.data(), static_cast<int>(s.batch.rows.size()), s.out.data());
        s.batch.scatter_logits(s.out.data(), n_vocab, s.logits.data());
    }
    return s.logits.data();
}

}  // namespace tessera
