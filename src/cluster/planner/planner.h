// Plans of slices (DESIGN.md: "every deployment is a plan of slices").
//
// Tensor parallel: every rank holds all layers; KV heads (each with its query
// heads) and FFN channels are split across ranks in proportion to their
// weights (measured speed, or --weights), for any number of ranks. Heads and
// channels move in the model's reduction units (at least 32 channels and one
// quantization block, so no block straddles two ranks).
// The output head's rows (the vocabulary) are split the same way, in units of
// kVocabGranule rows; rank 0 (the root) embeds tokens and gathers the logits.
#pragma once

#include "attn/kv_cache.h"
#include "model/llama_model.h"
#include "model/reduction_units.h"
#include "model/slice.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// Splits n_units into contiguous shares proportional to weights (largest
// remainder: shares differ from the exact proportion by less than one unit).
std::vector<int> apportion(int n_units, std::span<const double> weights);

constexpr int kVocabGranule = 32;


// One slice per rank, in rank order. Throws an Error for a weight that is not
// positive and finite.
// KV heads and FFN channels move in whole reduction units
// (model/reduction_units.h), so every plan sums the same numbers.
std::vector<Slice> plan_tensor_parallel(const ModelHParams& hp, std::span<const double> weights,
                                        const ReductionUnits& units, MoeSplit split = MoeSplit::kChannels);

// The expected time of one token's expert products on the slowest rank, in
// units of one whole expert's products on a rank of weight 1: the mean over
// token routings (taken as uniform: k distinct experts of n, every subset
// alike) of the busiest rank's share of the chosen experts' channels, divided
// by its weight (the same for every routing in kChannels). Zero for a dense
// model.
double expected_expert_load(const ModelHParams& hp, std::span<const double> weights, const ReductionUnits& units,
                            MoeSplit split);

// The split of the lowest expected load (kChannels on a tie, and for a dense
// model; then kExperts). Never kBalanced, whose shared units cost memory on
// every rank: a user asks for it. kMixed only where allowed: the Vulkan forward
// computes one rectangle of the experts, so a plan with a rank on a GPU
// leaves it out.
MoeSplit choose_moe_split(const ModelHParams& hp, std::span<const double> weights, const ReductionUnits& units,
                          bool allow_mixed = true);

// One rank's share on a machine: `host` names the machine ("" the root's),
// `need` the bytes of its share, `free_memory` what the rank reported free.
struct HostShare {
    std::string host;
    uint64_t need = 0;
    uint64_t free_memory = 0;
};
// Whether every machine has the memory for all its ranks' shares: their sum
// and the margin (headroom_margin) within the least free memory any of them
// reported (ranks of one machine share its memory).
bool shares_fit_hosts(std::span<const HostShare> shares);

// Where a tensor-parallel group sits: the whole model (its ranks also split
// the output head's rows: plan_tensor_parallel) or a block of layers, one
// stage of a pipeline (plan_stage_group: the head whole on its first rank).
struct GroupScope {
    bool whole_model = true;
    std::pair<int, int> layers{0, 0};  // a stage's layers (whole_model false)
    bool first = true, last = true;    // a stage's place in the pipeline
    static GroupScope stage(std::pair<int, int> layers, bool first, bool last) {
        return {false, layers, first, last};
    }
};

// The group's slices, one per rank in rank order, for its scope.
std::vector<Slice> plan_group(const ModelHParams& hp, const GroupScope& scope, std::span<const double> weights,
                              const ReductionUnits& units, MoeSplit split);

// The split a group takes where none is asked for: choose_moe_split's, or
// the balanced one where it computes less on the busiest rank (the units do
// not divide among the ranks), every rank holds units of its own, the ranks
// compute on CPUs (allow_mixed) and `fits` says every node has the memory for
// its share of it (the group's slices for its scope, in rank order). It reads
// the fewest bytes a token on every rank; its price is memory, so it is taken
// only where that memory is free. A whole model's run, a pipeline stage's
// group (its leader decides: only it hears its members' memory), `--auto`
// and `plan` all decide by it.
MoeSplit choose_moe_split_within_memory(const ModelHParams& hp, std::span<const double> weights,
                                        const ReductionUnits& units, bool allow_mixed, const GroupScope& scope,
                                        const std::function<bool(std::span<const Slice>)>& fits);

// Pipeline: contiguous blocks of layers, one per stage, sized in proportion
// to the stages' weights, every stage at least one layer. `counts` (layers per
// stage, summing to n_layer) overrides the weights when not empty. Returns
// [begin, end) per stage; throws an Error for an impossible plan.
std::vector<std::pair<int, int>> plan_layer_blocks(int n_layer, std::span<const double> weights,
                                                   std::span<const int> counts = {});

// The slices of one stage of a hybrid plan: a tensor-parallel group (one
// node: a whole-layer slice) over the layers [layers.first, layers.second).
// The group's first node embeds tokens when `first`, computes all the logits
// when `last` (a stage's head is not split: the pipeline's last stage sends
// the logits on in one message).
std::vector<Slice> plan_stage_group(const ModelHParams& hp, std::pair<int, int> layers,
                                    std::span<const double> group_weights, const ReductionUnits& units, bool first,
                                    bool last, MoeSplit split = MoeSplit::kChannels);

// What a rank keeps in memory for its slice: the bytes of weights it reads
// (only its rows and columns of each matrix) and its KV cache.
struct SliceFootprint {
    uint64_t weight_bytes = 0;
    uint64_t kv_bytes = 0;
    // What one decoding step reads: its matrices and rows of the output
    // head, not the embedding table (a token reads one row of it).
    uint64_t step_bytes = 0;
    // Of weight_bytes, the layers' matrices that may stay in the mapped file
    // and stream (model/streamed_layers.h): every one but packed column
    // slices; and the largest layer's share of them.
    uint64_t streamable_bytes = 0;
    uint64_t largest_layer_bytes = 0;
    // Of streamable_bytes, a mixture of experts' matrices that may stay in
    // the mapped file expert by expert (copy_to_private_memory), of which a
    // token reads expert_read_share (k / n).
    uint64_t expert_bytes = 0;
    double expert_read_share = 0.0;
    uint64_t total() const { return weight_bytes + kv_bytes; }
};

// How a slice fits the memory a node has: all in private memory, or (with
// offload) its later layers streamed from the mapped model file, or not at
// all. `extra` is what else the node needs (working buffers).
struct MemoryFit {
    bool fits = false;
    bool streamed = false;
    // What the private weights may take (ForwardConfig::weight_budget).
    uint64_t weight_budget = UINT64_MAX;
    // Bytes of layers read from the file every token, streamed (an estimate:
    // the overflow plus the window of two layers, in whole layers' bytes; of
    // a mixture of experts' overflow, the share of its experts a token
    // chooses: an upper bound, as recently used ones stay in the page cache).
    uint64_t streamed_bytes = 0;
    // The least memory this slice runs in, streaming every layer it can.
    uint64_t floor = 0;
};
MemoryFit memory_fit(const SliceFootprint& f, uint64_t extra, uint64_t have, bool offload);
// Beside weights, KV cache and working buffers a process allocates small
// things as it runs (frames, token lists, thread stacks, the page cache a
// load passes through): memory_fit leaves this much of the memory a node has
// unused, so that a node at its cgroup's limit is refused with a message
// rather than killed by the kernel.
uint64_t headroom_margin(uint64_t have);
// "needs N bytes (W of weights, K of KV cache) but has H available" with,
// where offload could not help either, the floor it would need streamed.
// `extra_what` names what `extra` is (working buffers; a draft model).
std::string describe_shortfall(const SliceFootprint& f, uint64_t extra, uint64_t have, bool offload,
                               const char* extra_what = "working buffers");

SliceFootprint slice_footprint(const LlamaModel& model, const Slice& slice, int n_ctx, KvCacheTypes kv_types);

// The working buffers a slice's forward pass and a worker's step loop hold
// for batches of n_batch positions (activations, partials, attention
// history of one KV head per thread), in bytes; checked arithmetic, since a
// peer chooses n_batch and n_ctx.
uint64_t slice_scratch_bytes(const ModelHParams& hp, const Slice& slice, int64_t n_batch, int64_t n_ctx,
                             int64_t n_threads);

}  // namespace tessera
