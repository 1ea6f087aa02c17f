// How sequence-parallel prefill (Astra) cuts a prompt: one contiguous chunk
// per node, in node order, sized by the nodes' weights (their speed) and what
// each batch costs (later positions attend to more of the prompt), every
// boundary on the batch grid a single node would use (pos0 + k * n_batch).
// On that grid each node runs exactly the batches a single node runs, with
// the same rows before them: every position gets a single node's bits.
#pragma once

#include "attn/sparse_pattern.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct ModelHParams;

struct PromptChunk {
    int pos0 = 0;
    int n_tok = 0;  // 0: this node gets nothing (fewer batches than nodes)
};

// What a prompt position costs a node, in units of one position's matrix
// work: 1, plus pair_cost for each position it attends to (history included).
struct PrefillCostModel {
    double pair_cost = 0.0;  // 0: every position costs the same
    SparseOptions sparse;    // enabled: attended positions are its candidates
    int window = 0;          // sliding layers' window (0: none)
    double sliding_share = 0.0;  // share of the layers that use the window
};

// The model's shape and attention: pair_cost is the FLOP ratio of one
// attended position (Q.K and the weighted V, every head) to one position's
// matrices, times kAttentionKernelFactor (float attention kernels do fewer
// operations a second than the int8 matrix kernels; measured below).
PrefillCostModel prefill_cost_model(const ModelHParams& hp, const SparseOptions& sparse);

// Measured on a 2-vCPU Xeon (AVX-512 VNNI), 1.1B shape in Q4_0, `tessera bench
// -p 512 -n 0 -t 2 -d D`: 5.50, 11.58 and 17.8 ms a position at depths 0, 1536
// and 3584, i.e. 4.5 ms of matrices and 3.0-4.0 us a attended position: 6.7e-4
// to 8.8e-4 of a position's matrix work, against a FLOP ratio of 9.3e-5.
inline constexpr double kAttentionKernelFactor = 8.0;

// Each batch's cost (batches of n_batch from pos0; the last may be short).
std::vector<double> prefill_batch_costs(int pos0, int n_tok, int n_batch, const PrefillCostModel& model);

// Chunks of positions [pos0, pos0 + n_tok) for weights.size() nodes: node i's
// share of the summed batch costs is its share of the weights, as near as the
// batch grid allows. No batch_costs: every batch costs the same.
std::vector<PromptChunk> plan_prompt_chunks(int pos0, int n_tok, int n_batch, std::span<const double> weights,
                                            std::span<const double> batch_costs = {});

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
