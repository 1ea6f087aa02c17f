// A Llama-family GGUF model opened for inference: the mapped file, its
// hyper-parameters and fingerprint. Weights are not touched here; a process
// takes views of the tensors of its own slice with load_slice_weights.
#pragma once

#include "model/gguf_file.h"
#include "model/hparams.h"
#include "model/slice.h"
#include "ops/matrix.h"
#include "model/streamed_layers.h"
#include "util/anonymous_memory.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera {

struct LayerWeights {
    std::vector<float> attn_norm;
    std::vector<float> ffn_norm;
    // What some families add (model/architecture.h); empty when the file has
    // none. Biases hold every head's rows (a slice reads its own).
    std::vector<float> q_bias, k_bias, v_bias;
    std::vector<float> q_norm, k_norm;                 // head_dim each, shared by every head
    std::vector<float> post_attn_norm, post_ffn_norm;  // n_embd each
    std::vector<float> wo_bias;     // n_embd (gpt-oss)
    std::vector<float> attn_sinks;  // n_head: each query head's sink logit (gpt-oss)
    Matrix wq;      // [n_head * head_dim rows, n_embd cols]
    Matrix wk;      // [n_head_kv * head_dim rows, n_embd cols]
    Matrix wv;      // [n_head_kv * head_dim rows, n_embd cols]
    Matrix wo;      // [n_embd rows, n_head * head_dim cols]
    Matrix w_gate;  // [n_ff rows, n_embd cols]
    Matrix w_up;    // [n_ff rows, n_embd cols]
    Matrix w_down;  // [n_embd rows, n_ff cols]
    // A mixture of experts instead of w_gate/w_up/w_down (hp.has_experts()):
    // the router and every expert's matrices stacked, expert e's rows at
    // [e * n_ff, (e + 1) * n_ff) of gate_exps and up_exps and at
    // [e * n_embd, (e + 1) * n_embd) of down_exps. A slice of some channels
    // loaded with ColumnSlices::kPack holds only its own (n_ff below: the
    // slice's n_ffn), down_exps' columns packed as w_down's are.
    // A slice of whole experts (Slice::expert_begin..end, every channel)
    // views only their rows: row_begin at its first expert's first row.
    // Where expert e's rows of the slice's channels are in gate_exps/up_exps:
    // from e * expert_rows + expert_first (n_ff and ffn_begin in a view of
    // the file; n_ffn and 0 in a packed share or a slice file).
    int64_t expert_rows = 0, expert_first = 0;
    // The experts' matrices went to the file of streamed weights (in their
    // private layout) for want of memory, outside its window of layers: a
    // token reads its k experts' rows from the page cache or the disk.
    bool experts_mapped = false;
    Matrix router;     // [n_expert rows, n_embd cols]
    Matrix gate_exps;  // [n_expert * n_ff rows, n_embd cols]
    Matrix up_exps;    // [n_expert * n_ff rows, n_embd cols]
    Matrix down_exps;  // [n_expert * n_embd rows, n_ff cols]
    // Their biases where the file has them (gpt-oss), whole (every channel of
    // every expert, whatever the slice): n_expert; n_expert * n_ff (expert
    // e's at e * n_ff); n_expert * n_embd.
    std::vector<float> router_bias, gate_exps_bias, up_exps_bias, down_exps_bias;
    // Each expert's factor of its products where the file has them (NVFP4
    // files converted from ModelOpt checkpoints: `ffn_*_exps.scale`), whole:
    // n_expert each, or empty.
    std::vector<float> gate_exps_scale, up_exps_scale, down_exps_scale;
    // The mixed split's further parts (Slice::tails, model/slice.h): their
    // experts' matrices, indexed as gate_exps, up_exps and down_exps are
    // (expert e's rows from e * rows + first; down's columns from the
    // part's first channel). Empty without them.
    struct ExpertTail {
        Matrix gate, up, down;
        int64_t rows = 0, first = 0;
    };
    std::vector<ExpertTail> tails;
};

// Views of the tensors one slice uses, indexed by the slice's own layers
// (layers[0] is layer slice.layer_begin).
struct SliceWeights {
    Slice slice;
    Matrix token_embd;  // set when slice.embeds
    Matrix output;      // set when the slice has vocab rows (token_embd when tied)
    std::vector<float> output_norm;
    std::vector<float> output_bias;  // n_vocab, empty if none
    std::vector<float> rope_freqs;  // per-pair RoPE frequency factors, empty if none
    std::vector<LayerWeights> layers;
    // Packed column slices (ColumnSlices::kPack); Matrix views point here.
    std::vector<std::unique_ptr<uint8_t[]>> packed;
    // The private copy of the matrices a token reads (copy_to_private_memory).
    AnonymousMemory private_copy;
    // The layers left in the mapped file because the copy would not fit its
    // budget (model/streamed_layers.h); null when every layer is private.
    std::unique_ptr<StreamedLayers> streamed;
    // A mixture of experts' matrices streamed expert by expert
    // (LayerWeights::experts_mapped), in bytes.
    uint64_t mapped_expert_bytes = 0;
};

class LlamaModel {
public:
    // Opens and validates the file's header and hyper-parameters.
    explicit LlamaModel(const std::string& path);

    const GgufFile& file() const { return *file_; }
    const ModelHParams& hparams() const { return hparams_; }
    const std::string& path() const { return file_->path(); }

private:
    std::unique_ptr<GgufFile> file_;
    ModelHParams hparams_;
};

// Takes views of every tensor the slice needs, checking each one's presence,
// shape and type; a mismatch is an Error naming the tensor. Also checks that
// the slice's column ranges fall on quantization block boundaries.
//
// ColumnSlices::kPack copies a slice's columns of wo and w_down (when it owns
// only some of them) into memory of its own and releases the mapped pages:
// rows of those matrices interleave every rank's columns, so reading them in
// place would keep nearly the whole matrix resident on every rank.
// ColumnSlices::kView maps everything in place (sizes, probes, single node).
enum class ColumnSlices { kView, kPack };

SliceWeights load_slice_weights(const LlamaModel& model, const Slice& slice, ColumnSlices columns = ColumnSlices::kView);

// The row-split projections, and where a file stores each one's rows: in its
// own tensor (blk.N.attn_q.weight, ...) or as a band of a fused one
// (blk.N.attn_qkv.weight: Q, K, V rows; blk.N.ffn_up.weight of 2 n_ff rows
// without ffn_gate: gate rows, then up). Loading and slice files both read
// through this.
enum class Projection { kQ, kK, kV, kGate, kUp };
struct ProjectionRows {
    const GgufTensorInfo* tensor = nullptr;
    int64_t first_row = 0;  // the projection's row 0 within the tensor
    int64_t rows = 0;
    std::string name;       // the projection's own tensor name (blk.N.attn_q.weight, ...)
    // Its bias's tensor and first element, or nullptr (Q, K and V only).
    const GgufTensorInfo* bias = nullptr;
    int64_t bias_first = 0;
};
ProjectionRows find_projection(const GgufFile& file, const ModelHParams& hp, int layer, Projection p);

// "blk.0.attn_q.weight" -> "blk.0.attn_q.scale": the factor llama.cpp's
// converter writes beside each NVFP4 weight of a ModelOpt checkpoint (its
// second-level scale: one, or one per expert), which multiplies its products.
std::string weight_scale_name(const std::string& weight);

// Moves the rows the slice computes of the matrices every token reads (each
// layer's seven and the output head) that are still views of the mapped file
// into one block of private memory, releasing the mapped pages as it goes, so
// resident memory stays the slice's share. Products run as fast or faster
// from private memory than from the page cache (util/anonymous_memory.h); the
// token embeddings, of which a token reads one row, stay mapped. Packed column
// slices move into the same block. Types with a group layout are stored in
// groups of 16 rows (ops/row_groups.h) where this CPU has a kernel for them,
// long rows in column panels; wo's and w_down's panels hold whole units of
// wo_unit_cols and down_unit_cols columns where given (model/reduction_units.h).
//
// Larger than memory: when the copy would take more than `budget` bytes, the
// longest prefix of layers that fits (beside the head and the packed column
// slices, and room for two streamed layers) is copied to private memory and
// the later layers, in the same layout, to a file of their own that streams
// them in and out around their use (w.streamed, model/streamed_layers.h): the
// same kernels read the same bytes, so the output does not change.
// A mixture of experts first streams expert by expert: the experts of the
// last layers (from the last one back, as few as it takes) go to that file
// too, but outside its window of layers: a token reads only the k experts it
// chooses (asked for as soon as the router has chosen), and the page cache
// keeps the ones used recently. Whole layers stream only if that is not
// enough. (Only experts viewed whole in the file: a rank's packed share of
// every expert's channels is private already.)
// Whether a whole F32 matrix in row layout holds only BF16 values (the low
// 16 bits of every value zero): copy_to_private_memory holds such a router
// as BF16.
bool holds_bf16_values(const Matrix& m);

void copy_to_private_memory(SliceWeights& w, const ModelHParams& hp, int64_t wo_unit_cols = 0,
                            int64_t down_unit_cols = 0, uint64_t budget = UINT64_MAX);

}  // namespace tessera
