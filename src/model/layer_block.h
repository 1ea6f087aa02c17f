// A block of whole layers that runs residual rows in place, wherever its
// work happens: one process (SliceForward over a whole-layer slice) or a
// tensor-parallel group (TensorParallelDecoder over its ranks). A pipeline
// stage drives one without knowing which.
#pragma once

#include "model/hparams.h"
#include "model/slice.h"
#include "util/error.h"

#include <cstdint>
#include <functional>
#include <span>

namespace tessera {

// Rows of one sequence at consecutive positions pos0 .. pos0 + n_tok - 1,
// inside a batch that may hold several sequences (continuous batching).
struct SeqRun {
    int seq = 0;
    int pos0 = 0;
    int n_tok = 0;
    // Whoever computes the run's logits (a pipeline's last stage) gives
    // every row's, not only the last one's (a speculative verification).
    bool all_logits = false;
};

class LayerBlock {
public:
    virtual ~LayerBlock() = default;
    // x: n_tok rows of n_embd residual values at positions pos0.., updated in
    // place by every layer of the block (n_tok at most the block's batch).
    virtual void forward_layers(float* x, int pos0, int n_tok) = 0;
    // The same for rows of several sequences (runs cover the rows in order).
    // A block that keeps one sequence takes only a single run of sequence 0.
    virtual void forward_layers(float* x, std::span<const SeqRun> runs) {
        if (runs.size() != 1 || runs[0].seq != 0) {
            throw make_error("this plan keeps one sequence: a batch of several sequences needs --parallel support");
        }
        forward_layers(x, runs[0].pos0, runs[0].n_tok);
    }
    // Compaction of one sequence's cache of n_used positions (a context
    // shift, an eviction): position kept[j] becomes position j (kept strictly
    // increasing), keys re-rotated to their new positions; the rest is gone.
    virtual void compact_context(int seq, std::span<const int> kept, int n_used) = 0;
    // Adds the attention each of positions [0, n_used) received (fixed-point
    // units, attn/attention_mass.h) in this block's layers to totals.
    virtual void add_attention_mass(int seq, int n_used, int64_t* totals) = 0;
};

// Checks runs against a node's sequences (distinct, in [0, n_seq)) and
// context; returns their rows (at least 1, at most n_batch). Every forward
// checks alike.
int check_seq_runs(std::span<const SeqRun> runs, int n_seq, int n_ctx, int n_batch);
// Checks a compaction of sequence seq (LayerBlock::compact_context): kept
// strictly increasing inside [0, n_used), n_used inside the context.
void check_compaction(int seq, std::span<const int> kept, int n_used, int n_seq, int n_ctx);

// A process's own slice of whole layers with the slice's ends: what a
// pipeline stage serves with, wherever it computes (SliceForward on the CPU,
// VulkanSliceForward on a GPU).
class SliceRunner : public LayerBlock {
public:
    virtual const ModelHParams& hparams() const = 0;
    virtual const Slice& slice() const = 0;
    virtual int n_ctx() const = 0;
    // Sequences with a cache of their own.
    virtual int n_seq() const = 0;
    // Most rows one call takes.
    virtual int n_batch() const = 0;
    // Checks runs against the sequences (distinct, in range) and the
    // context; returns their rows (at most n_batch).
    virtual int check_runs(std::span<const SeqRun> runs) const = 0;
    // x[t] = embedding of tokens[t] (a slice that embeds).
    virtual void embed(std::span<const int32_t> tokens, float* x) const = 0;
    // logits[t] = output · rmsnorm(x[t]) (a slice with the whole head).
    virtual void logits(const float* x, int n_tok, float* logits) = 0;
};

// A tensor-parallel rank's share of each layer (its KV heads and FFN
// channels), wherever it computes (SliceForward, VulkanSliceForward): the
// group's layer loop (cluster/tensor_parallel/tp_layers.h) asks it for its
// partial of each attention and FFN output, sums the group's partials, and
// has it add the sum to the residual. Partials are exact sums over
// reduction units (model/reduction_units.h), so every rank and device adds
// the same numbers.
class RankRunner : public SliceRunner {
public:
    // partial[t] = this share of the layer's attention (FFN) output for the
    // residual rows x (normed here with the layer's norm); the attention's
    // K/V are stored first, so the rows attend causally to themselves.
    virtual void attention_partial_of(int layer, const float* x, std::span<const SeqRun> runs, double* partial) = 0;
    virtual void ffn_partial_of(int layer, const float* x, int n_tok, double* partial) = 0;
    // x[t] += the group's sum (exact: of the partials above; fast: in float).
    virtual void add_attention_output(int layer, const double* partial, float* x, int n_tok) = 0;
    virtual void add_ffn_output(int layer, const double* partial, float* x, int n_tok) = 0;
    virtual void add_attention_output(int layer, const float* sum, float* x, int n_tok) = 0;
    virtual void add_ffn_output(int layer, const float* sum, float* x, int n_tok) = 0;
    // Partials in bands of their columns (SliceForward::set_partial_bands):
    // on_band(c0, c1) once columns [c0, c1) of every row are final.
    using BandSink = std::function<void(int c0, int c1)>;
    virtual void set_partial_bands(int bands, BandSink on_band, int first_band = 0) = 0;
    // h[t] = rmsnorm(x[t]) with the output norm weights (a slice with outputs).
    virtual void norm_output_input(const float* x, float* h, int n_tok) const = 0;
    // logits[t * stride + v - vocab_begin] for this share's vocab rows, of
    // rows h already normed with the output norm.
    virtual void head_rows(const float* h, int n_tok, float* logits, int64_t stride) = 0;
};

}  // namespace tessera
