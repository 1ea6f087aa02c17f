// How sequence-parallel prefill (Astra) cuts a prompt: one contiguous chunk
// per node, in node order, sized by the nodes' weights (their speed), every
// boundary on the batch grid a single node would use (pos0 + k * n_batch).
// On that grid each node runs exactly the batches a single node runs, with
// the same rows before them: every position gets a single node's bits.
#pragma once

#include <span>
#include <vector>

namespace tessera {

struct PromptChunk {
    int pos0 = 0;
    int n_tok = 0;  // 0: this node gets nothing (fewer batches than nodes)
};

// Chunks of positions [pos0, pos0 + n_tok) for weights.size() nodes.
std::vector<PromptChunk> plan_prompt_chunks(int pos0, int n_tok, int n_batch, std::span<const double> weights);

}  // namespace tessera
