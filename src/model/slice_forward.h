// The forward pass of one slice, written once and used by every deployment.
// Each step is a plain function of its inputs: embed a token, normalize the
// residual for a layer's attention or FFN, compute this slice's *partial* of
// the attention or FFN output, and the logits. A driver sums the partials
// into the residual: a single node adds its one partial directly, a
// tensor-parallel group reduces the partials of its ranks first.
//
// Named intermediates (per position): x (residual), h (normed input), q/k/v
// (own heads), attn (own heads' attention output), gate/up (own channels),
// partial (n_embd, this slice's share of wo·attn or w_down·ffn).
#pragma once

#include "attn/attention.h"
#include "attn/kv_cache.h"
#include "model/layer_block.h"
#include "model/llama_model.h"
#include "model/moe_router.h"
#include "model/reduction_units.h"
#include "ops/matmul.h"
#include "ops/matvec.h"
#include "ops/rope.h"
#include "util/thread_pool.h"

#include <functional>
#include <span>
#include <vector>

namespace tessera {

struct ForwardConfig {
    int n_ctx = 0;
    KvCacheTypes kv_types;  // K and V rows (llama.cpp's -ctk/-ctv)
    // Sparse attention for the layers without a sliding window of their own
    // (attn/sparse_pattern.h); disabled: dense.
    SparseOptions sparse;
    // Keep, per sequence, the attention each position received (what
    // --context-full evict ranks positions by).
    bool track_attention = false;
    // Most positions one call processes at once (llama.cpp's -b/-ub): longer
    // prompts go through in batches of this size. Scratch grows to it.
    int n_batch = 512;
    // Weights in private memory (copy_to_private_memory): generation as
    // fast or faster; false computes from the mapped file (--mmap).
    bool private_weights = true;
    // What the private copy may take (with private_weights): beyond it the
    // later layers are streamed from the mapped file (model/streamed_layers.h).
    uint64_t weight_budget = UINT64_MAX;
    // Whether a plan may give a node more weights than its memory holds, to
    // stream (false: --no-offload, such a plan is refused).
    bool offload = true;
    // Sequences with a KV cache of their own (serve --parallel): each holds
    // n_ctx positions, and one batch may carry rows of several of them.
    int n_seq = 1;
};

// x[t] = the embedding of tokens[t] (a row of token_embd, times sqrt(n_embd)
// where the family scales embeddings); a token outside the vocabulary is an
// Error.
void embed_tokens(const Matrix& token_embd, const ModelHParams& hp, std::span<const int32_t> tokens, float* x);

// x[t] += a layer's attention (FFN) output, given the group's sum of the
// partials (exact: doubles; fast: floats): joined exactly (add_exact), or
// through wo's bias and the family's post-norm (Gemma), which need the whole
// sum. Every forward (SliceForward, a GPU's) joins alike.
struct JoinScratch {
    std::vector<float> output, normed;
};
void join_attention_output(const LayerWeights& w, const ModelHParams& hp, const double* partial, float* x, int n_tok,
                           JoinScratch& s);
void join_ffn_output(const LayerWeights& w, const ModelHParams& hp, const double* partial, float* x, int n_tok,
                     JoinScratch& s);
void join_attention_output(const LayerWeights& w, const ModelHParams& hp, const float* sum, float* x, int n_tok,
                           JoinScratch& s);
void join_ffn_output(const LayerWeights& w, const ModelHParams& hp, const float* sum, float* x, int n_tok,
                     JoinScratch& s);

// Every step works on a batch of n_tok rows; activations are row-major
// [n_tok][width]. The rows are runs of consecutive positions of one sequence
// each (SeqRun, layer_block.h): a prompt is one run, a step of continuous
// batching one run per active sequence. Only attention reads the runs (each
// run attends to its own sequence's cache); every other step is per row, and
// a row's result does not depend on the other rows of its batch.
class SliceForward : public RankRunner {
public:
    // Runs of at most this many rows attend position by position (see
    // attention_partial), so verifying a speculative draft gives the bits of
    // plain decoding.
    static constexpr int kRowwiseRows = 32;

    SliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, ThreadPool& pool);

    const ModelHParams& hparams() const override { return hparams_; }
    const Slice& slice() const override { return weights_.slice; }
    // The layers streamed from the mapped file (null: all in private memory).
    const StreamedLayers* streamed() const { return weights_.streamed.get(); }
    // What a token reads from disk on average, where the weights did not fit
    // the budget: the streamed layers, and k of every n experts left mapped.
    uint64_t streamed_bytes_per_token() const;
    // The weights copied to private memory, in bytes.
    uint64_t private_weight_bytes() const { return weights_.private_copy.size(); }

    // A mixture of experts' choices, counted at every layer: how many were
    // chosen, how many of them the previous token had chosen at that layer,
    // and how many one of the last kRecentTokens tokens had (what a cache of
    // the experts of that many recent tokens would have held). By chance:
    // k/n and 1 - (1 - k/n)^kRecentTokens. Generation steps (one row) and
    // prompt batches apart; a batch's rows are taken as consecutive tokens
    // (true of one sequence's prompt: run, perplexity, bench).
    static constexpr int kRecentTokens = 4;
    struct ExpertReuse {
        uint64_t choices = 0, previous = 0, recent = 0;
    };
    const ExpertReuse& expert_reuse() const { return reuse_; }
    const ExpertReuse& prompt_expert_reuse() const { return prompt_reuse_; }
    const KvCache& kv_cache(int seq = 0) const { return caches_.at(static_cast<size_t>(seq)); }
    int n_ctx() const override { return caches_[0].n_ctx(); }
    int n_seq() const override { return static_cast<int>(caches_.size()); }
    int n_batch() const override { return n_batch_; }
    // Sparse attention's options (disabled: dense).
    const SparseOptions& sparse() const { return sparse_; }

    // x[t] = embedding of tokens[t] (needs slice.embeds).
    void embed(std::span<const int32_t> tokens, float* x) const override;
    // h[t] = rmsnorm(x[t]) with the layer's attention / FFN norm weights.
    void norm_attention_input(int layer, const float* x, float* h, int n_tok) const;
    void norm_ffn_input(int layer, const float* x, float* h, int n_tok) const;
    // x[t] += the layer's attention / FFN output, given the sum of every
    // rank's partial (a single node's own): the sum joins the residual as it
    // is (add_exact), or through the family's post-norm (Gemma), which needs
    // the whole sum and so runs where the partials are summed.
    void add_attention_output(int layer, const double* partial, float* x, int n_tok) override;
    void add_ffn_output(int layer, const double* partial, float* x, int n_tok) override;
    // The same from partials summed in float (--fast tensor parallel).
    void add_attention_output(int layer, const float* sum, float* x, int n_tok) override;
    void add_ffn_output(int layer, const float* sum, float* x, int n_tok) override;
    // Partials are exact sums over reduction units (ops/fixed_sum.h,
    // model/reduction_units.h): the ranks' partials add up, in any order, to
    // exactly what one node holding every unit computes. add_exact joins a
    // partial to the residual.
    // partial[t] = this slice's share of the layer's attention output for
    // position pos0 + t, given its normed input h[t]; stores the slice's K/V
    // for those positions first, so the batch attends causally to itself.
    void attention_partial(int layer, const float* h, int pos0, int n_tok, double* partial);
    // The same for rows of several sequences: runs (checked: sequences
    // distinct and in range, positions inside the context) cover the rows of
    // h in order.
    void attention_partial(int layer, const float* h, std::span<const SeqRun> runs, double* partial);
    // partial[t] = this slice's share of the layer's FFN output.
    void ffn_partial(int layer, const float* h, int n_tok, double* partial);
    // The same from the residual rows (normed into the slice's own scratch).
    void attention_partial_of(int layer, const float* x, std::span<const SeqRun> runs, double* partial) override;
    void ffn_partial_of(int layer, const float* x, int n_tok, double* partial) override;
    // Partials in bands: while attention_partial and ffn_partial compute
    // their last product (wo, w_down), they call on_band(c0, c1) each time
    // columns [c0, c1) of every row of the partial are final, in `bands`
    // bands of whole 64-column runs (the last one takes the rest), so a
    // tensor-parallel rank can send each band while the next is computed.
    // A band's rows are computed as the whole product computes them (row
    // blocks and groups never straddle a band). bands <= 1 or no sink: one
    // product, no calls. A slice with no heads or channels calls nothing.
    // first_band: the band computed first, the others following it in
    // order and wrapping around (a reduce-scatter rank computes the
    // segments it sends before its own); a row's bits do not depend on it.
    // How n_rows are cut into at most `bands` bands: their count, and band
    // b's end (band b starts where b - 1 ends).
    static int64_t partial_band_count(int64_t n_rows, int bands);
    static int64_t partial_band_end(int64_t n_rows, int64_t count, int64_t b);
    void set_partial_bands(int bands, BandSink on_band, int first_band = 0) override;
    // logits[t] = output · rmsnorm(x[t]) (needs slice.outputs and the whole
    // vocabulary); n_vocab per row.
    void logits(const float* x, int n_tok, float* logits) override;
    // h[t] = rmsnorm(x[t]) with the output norm weights (needs slice.outputs).
    void norm_output_input(const float* x, float* h, int n_tok) const override;
    // logits[t * stride + v - vocab_begin] = output[v] · h[t] (+ bias, then
    // the final soft cap where the family has them) for this slice's vocab
    // rows: its share of a head split across ranks.
    void head_rows(const float* h, int n_tok, float* logits, int64_t stride) override;

    // Runs every layer of the slice over the residual rows x in place, adding
    // each partial straight into x: what a process does when it holds whole
    // layers (a single node, or a pipeline stage).
    void forward_layers(float* x, int pos0, int n_tok) override;
    void forward_layers(float* x, std::span<const SeqRun> runs) override;
    // One layer of forward_layers (a sequence-parallel node runs its chunk
    // layer by layer, each layer once the earlier chunks' rows are in).
    void forward_layer(int layer, float* x, std::span<const SeqRun> runs);
    // A layer's K/V rows of sequence 0 at positions [pos0, pos0 + n), every
    // owned head, as the cache holds them (KvCache::read_rows, head after
    // head): what a sequence-parallel node sends its peers. write_kv_rows
    // stores such rows (their size checked against this slice's cache).
    uint64_t kv_rows_bytes(int n) const;
    void read_kv_rows(int layer, int pos0, int n, std::vector<uint8_t>& out) const;
    // The same for the KV heads [kv_head_begin, kv_head_end) only (the
    // model's numbering, inside this slice's): what a slice owning just those
    // heads stores with write_kv_rows (a prefilled cache handed to a
    // tensor-parallel rank).
    void read_kv_rows(int layer, int pos0, int n, int kv_head_begin, int kv_head_end, std::vector<uint8_t>& out) const;
    void write_kv_rows(int layer, int pos0, int n, std::span<const uint8_t> rows);
    // The same rows as float, row-major [n][owned KV heads * head_dim], keys
    // before RoPE (rotated back from their positions: what a codebook of the
    // model's keys holds, model/kv_codebooks.h). write_kv_floats rotates the
    // keys to their positions and stores both as the cache's types hold them.
    void read_kv_floats(int layer, int pos0, int n, float* k, float* v);
    // The K (before RoPE) and V rows, in that layout, that n positions'
    // normed attention inputs h (norm_attention_input) project to: what a
    // peer sent hidden states rather than rows would store (the exchange
    // benchmark compares the two). Layers with K/V biases or a K norm are
    // refused.
    void kv_from_input(int layer, const float* h, int n, float* k, float* v);
    void write_kv_floats(int layer, int pos0, int n, const float* k, const float* v);
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;
    // For benchmarks: positions [0, n) of a sequence's cache get random K/V
    // rows in every layer (landmarks included), as if a history had run.
    void fill_history(int seq, int n, uint64_t seed);
    // Checks runs against the sequences (distinct, in range) and the context;
    // returns their rows (at most n_batch).
    int check_runs(std::span<const SeqRun> runs) const override;

private:
    const LayerWeights& layer_weights(int layer) const;
    // Positions [pos0, pos0 + n) of one of the slice's layers, inside the context.
    void check_kv_rows(int layer, int pos0, int n) const;
    void check_batch(int n_tok) const;
    // The activation rows h converted to the vec_dot type a matrix needs; each
    // input is converted once per type even when several matrices read it.
    const QuantizedActivation& activation_for(const Matrix& m, const float* h, int64_t n, int n_tok);
    // Runs products of the same input h (n_tok rows of n floats).
    void run_jobs(std::span<const MatmulJob> jobs, const float* h, int64_t n, int n_tok);
    // Forgets converted activations (their source buffers get new contents).
    void new_activations();
    // One position's RoPE, K/V store and attention of every owned head (q_, k_,
    // v_ -> attn_), its output converted for wo on the way.
    void attend_one(const LayerWeights& w, int layer, int seq, int pos);
    // Several sequences' single positions (rows row_of[i] of q_): prepared
    // and stored one by one, then attended in one region of (row, KV head)
    // items, each item the same work attend_one does for that head.
    void attend_singles(const LayerWeights& w, int layer, std::span<const SeqRun> runs, std::span<const int> rows);

    // Bias, Q/K norm and RoPE of position pos's own heads (q and k: one
    // position's rows), before the K/V store.
    void prepare_heads(const LayerWeights& w, int layer, int pos, float* q, float* k, float* v, int kv_head_begin,
                       int kv_head_end);
    // The attention options of a layer (scale, soft cap, window).
    AttentionOptions attention_options(int layer) const;
    RopeTable& rope_of(int layer);
    JoinScratch join_;
    // The gate of the gate_/up_ rows into gate_, converted for w_down on the way.
    const QuantizedActivation& gated_activation(const Matrix& down, int64_t n_ffn, int n_tok);
    // The same for any rows: gate[t] = act(gate[t]) * up[t] (times row_scale[t]
    // where given), converted into `act` for `down`.
    void gate_rows(const Matrix& down, float* gate, const float* up, int64_t n_ffn, int n_tok, const float* row_scale,
                   QuantizedActivation& act);
    // A mixture of experts' FFN partial (slice_forward_moe.cpp): the router,
    // then each chosen expert's product over the slice's channels, weighted.
    void moe_ffn_partial(int layer, const float* h, int n_tok, double* partial);
    // One part of the slice's experts (model/slice.h ExpertPart) and its
    // matrices, as LayerWeights describes them.
    struct ExpertMatrices {
        const Matrix *gate, *up, *down;
        int64_t rows, first;
        bool mapped;
        ExpertPart part;
    };
    // Adds that part's products for the rows' choices (moe_.choices) into partial.
    void expert_part_partial(const LayerWeights& w, const ExpertMatrices& x, const float* h, int n_tok, double* partial);
    // The experts' scratch: router logits and choices per row, rows gathered
    // per expert, their gate/up/down results and converted activations.
    struct MoeScratch {
        std::vector<float> logits, h, gate, up, scale;
        std::vector<double> y;
        std::vector<ExpertChoice> choices;  // k per row
        std::vector<ExpertChoice> chosen;   // one position's choices of one part
        std::vector<int32_t> rows;          // rows of the batch by expert
        std::vector<int32_t> first, fill;   // each expert's first (and next) entry in rows
        std::vector<MatmulJob> jobs;
        std::vector<UnitsJob> down_jobs;
        std::vector<QuantizedActivation> acts;
    };
    MoeScratch moe_;
    // Counts a generation step's choices at `layer` into reuse_.
    void note_expert_choices(int layer, std::span<const ExpertChoice> choices, int n_tok, int k);
    ExpertReuse reuse_, prompt_reuse_;
    std::vector<std::vector<int>> recent_experts_;  // per layer: the last kRecentTokens tokens' experts, oldest first

    ModelHParams hparams_;
    SliceWeights weights_;
    ThreadPool& pool_;
    std::vector<KvCache> caches_;  // one per sequence
    std::vector<std::unique_ptr<AttentionMass>> masses_;  // one per sequence, with track_attention
    // The attention options of a layer for one sequence's rows.
    AttentionOptions attention_options(int layer, int seq) const;
    Attention attention_;
    // One table per distinct (base, scale) among the slice's layers (Gemma 3's
    // local layers have their own), and each layer's.
    std::vector<RopeTable> ropes_;
    std::vector<int> rope_of_layer_;
    std::vector<std::pair<float, float>> rope_keys_;  // each table's (base, scale)
    int n_batch_;
    SparseOptions sparse_;
    int32_t n_q_heads_;  // query heads of this slice
    int64_t q_begin_;    // first query row/column of this slice
    // Scratch for n_batch positions, sized once so the token loop does not allocate.
    std::vector<float> q_, k_, v_, attn_, gate_, up_, norm_, h_;
    std::vector<double> partial_;
    int partial_bands_ = 1, first_band_ = 0;
    BandSink on_band_;
    // y = w's columns `cols` (this slice's share) · x for rows [0, n_rows),
    // in bands when set_partial_bands asked for them.
    void partial_product(const Matrix& w, int64_t n_rows, int64_t col_begin, int64_t n_cols,
                         const QuantizedActivation& x, int64_t unit_cols, double* y);
    std::vector<SeqRun> single_runs_;  // attention_partial's single-position runs
    std::vector<int> single_rows_;     // and their rows
    ReductionUnits units_;
    struct ConvertedActivation {
        QuantizedActivation act;
        const float* source = nullptr;
        int n_tok = 0;
    };
    // One per activation type (F32, Q8_0, Q8_K): a file mixing weight types
    // converts each input once per type it meets.
    ConvertedActivation converted_[3];
    ConvertedActivation& slot_for(const Matrix& m);
};

}  // namespace tessera
