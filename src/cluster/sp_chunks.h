// How sequence-parallel prefill (Astra) cuts a prompt: one contiguous chunk
// per node, in node order, sized by the nodes' weights (their speed), every
// boundary on the batch grid a single node would use (pos0 + k * n_batch).
// On that grid each node runs exactly the batches a single node runs, with
// the same rows before them: every position gets a single node's bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct PromptChunk {
    int pos0 = 0;
    int n_tok = 0;  // 0: this node gets nothing (fewer batches than nodes)
};

// Chunks of positions [pos0, pos0 + n_tok) for weights.size() nodes.
std::vector<PromptChunk> plan_prompt_chunks(int pos0, int n_tok, int n_batch, std::span<const double> weights);

// The payload bytes each node sends and receives for one prompt, rows of
// `position_bits` per position and layer (exact rows, or packed codebook
// indices) plus each message's header, as the root relays them: every node
// sends its own chunk's rows to the root; the root sends each node the rows
// of every position before its chunk (`history` of them before the prompt,
// the root's own chunk, and the other nodes' chunks it relays).
struct ChunkTraffic {
    uint64_t sent = 0, received = 0;
};
std::vector<ChunkTraffic> prompt_chunk_traffic(std::span<const PromptChunk> chunks, int history, int n_layer,
                                               uint64_t position_bits, int n_batch);

}  // namespace tessera
