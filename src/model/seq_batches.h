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
    std::vector<SeqRun> runs;
    std::vector<int32_t> tokens;   // the runs' tokens, row by row
    std::vector<size_t> finishing;  // evals whose last token is in this batch
    std::vector<int> last_rows;     // and the row it is in

    // The finishing rows of x (n_embd floats each), back to back in out.
    void gather_last_rows(const float* x, int64_t n_embd, std::vector<float>& out) const;
    // Row f of logits (n_vocab floats each) to row finishing[f] of all.
    void scatter_logits(const float* logits, size_t n_vocab, float* all) const;
};

class SeqBatches {
public:
    // Checks every eval has tokens.
    SeqBatches(std::span<const SeqEval> evals, int n_batch);
    // The next batch into b; false when every token has been taken.
    bool next(SeqBatch& b);

private:
    std::span<const SeqEval> evals_;
    size_t n_batch_;
    std::vector<size_t> done_;
};

}  // namespace tessera
