// A slice's layers on a Vulkan device (--device vulkan[:N]): the weights
// uploaded once to the device's memory in the file's own block layout, the
// KV caches there too, and each call's layers recorded into one command
// buffer, so activations cross to the CPU only at the slice's ends (the
// residual rows in and out, or the logits). Every step follows the CPU's
// canonical order (gpu/shaders), so the logits equal a CPU node's bit for
// bit and a GPU node can join an --exact plan.
//
// What runs here (the rest is refused by name when the slice is built):
// dense FFNs and mixtures of experts (whole layers) with SwiGLU or GELU, grouped-query attention with RoPE (both
// layouts), Q/K/V biases, Q/K norms, post-norms, soft caps and sliding windows; F32, F16, Q8_0, Q4_0, Q4_K
// and Q6_K weights; keys cached in F32 or F16, values in those or Q8_0 and
// Q4_0; one sequence.
#pragma once

#include "attn/sparse_pattern.h"
#include "gpu/shaders.h"
#include "gpu/vulkan_buffer.h"
#include "gpu/vulkan_kernel.h"
#include "model/layer_block.h"
#include "model/llama_model.h"
#include "model/moe_router.h"
#include "model/reduction_units.h"
#include "model/slice_forward.h"
#include "ops/rope.h"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

class VulkanSliceForward : public RankRunner {
public:
    // `slice` holds whole layers (every head and channel).
    VulkanSliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, int device_index);
    ~VulkanSliceForward() override;

    const ModelHParams& hparams() const override { return hparams_; }
    const Slice& slice() const override { return weights_.slice; }
    int n_ctx() const override { return n_ctx_; }
    int n_batch() const override { return n_batch_; }
    int check_runs(std::span<const SeqRun> runs) const override;
    const VulkanDeviceInfo& device() const { return context_->info(); }
    // What this slice holds in device memory: weights, caches and scratch.
    uint64_t device_bytes() const { return device_bytes_; }
    // Whether its block products sum with packed integer dot instructions
    // (gpu/vulkan_context.h's integer_dot_products).
    bool packed_dots() const;
    // Whether its float products run their trees by subgroup shuffles
    // (gpu/vulkan_context.h's subgroup_trees).
    bool subgroup_trees() const;
    // The kernels built so far, by name: each is built by its first use, so
    // a model's forward builds its own weight types' products and its
    // family's activation, no other.
    std::vector<std::string> built_kernels() const;
    // What a slice of these weights would hold there (checked against the
    // device's memory before anything is uploaded).
    static uint64_t footprint(const SliceWeights& w, const ModelHParams& hp, const ReductionUnits& units, int n_batch,
                              int n_ctx, KvCacheTypes kv, int n_seq = 1, bool track_attention = false,
                              const SparseOptions& sparse = SparseOptions());
    int n_seq() const override { return n_seq_; }

    // x[t] = embedding of tokens[t], on the CPU (needs slice.embeds).
    void embed(std::span<const int32_t> tokens, float* x) const override;
    void forward_layers(float* x, int pos0, int n_tok) override;
    // Rows of several sequences (continuous batching, serve --parallel): each
    // run attends to its own sequence's cache.
    void forward_layers(float* x, std::span<const SeqRun> runs) override;
    // logits[t] = output · rmsnorm(x[t]) on the device (needs slice.outputs).
    void logits(const float* x, int n_tok, float* logits) override;
    // A tensor-parallel share's partials (RankRunner): the residual rows
    // cross to the device, the exact partial (doubles) back.
    void attention_partial_of(int layer, const float* x, std::span<const SeqRun> runs, double* partial) override;
    void ffn_partial_of(int layer, const float* x, int n_tok, double* partial) override;
    void add_attention_output(int layer, const double* partial, float* x, int n_tok) override;
    void add_ffn_output(int layer, const double* partial, float* x, int n_tok) override;
    void add_attention_output(int layer, const float* sum, float* x, int n_tok) override;
    void add_ffn_output(int layer, const float* sum, float* x, int n_tok) override;
    void set_partial_bands(int bands, BandSink on_band, int first_band = 0) override;
    void head_rows(const float* h, int n_tok, float* logits, int64_t stride) override;
    // On the host, with the CPU's own rms_norm (a tensor-parallel root's).
    void norm_output_input(const float* x, float* h, int n_tok) const override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;

    // A matrix in device memory, in the file's row layout.
    struct DeviceMatrix {
        QuantType type = QuantType::F32;
        int64_t rows = 0, cols = 0;
        std::unique_ptr<VulkanBuffer> buffer;
    };

private:
    struct Layer;
    struct Kernels;

    // Buffers of the device's own memory, counted in device_bytes_.
    std::unique_ptr<VulkanBuffer> device_buffer(size_t bytes);
    std::unique_ptr<VulkanBuffer> floats(const std::vector<float>& values);
    // Rows [first_row, +rows) of m, columns [first_col, +cols) (the whole tensor's numbering).
    DeviceMatrix matrix(const Matrix& m, const char* what, int layer, int64_t first_row, int64_t rows,
                        int64_t first_col, int64_t cols);
    // A mixture of experts' stacked matrix for this share: for each of its
    // experts, rows [first_row, + rows) of the expert's per_expert-row band,
    // columns [first_col, + cols), packed expert after expert.
    DeviceMatrix experts_matrix(const Matrix& m, const char* what, int layer, int64_t per_expert, int64_t first_row,
                                int64_t rows, int64_t first_col, int64_t cols);
    // Recording steps (gpu/shaders.h's kernels).
    void record_norm(VkCommandBuffer cb, const VulkanBuffer& x, const VulkanBuffer& weight, const VulkanBuffer& out,
                     int rows, int64_t n);
    // The activation a matrix of `type` reads: the float rows themselves, or
    // their Q8_0 / Q8_K blocks converted once per input (`input` counts
    // inputs, so a new input converts anew).
    const VulkanBuffer& record_activation(VkCommandBuffer cb, QuantType type, const VulkanBuffer& rows, int n_tok,
                                          int64_t n);
    void record_product(VkCommandBuffer cb, const DeviceMatrix& w, const VulkanBuffer& act, int n_tok,
                        const VulkanBuffer& y, int64_t y_stride, int64_t unit_cols, bool then_barrier = true);
    // A product's dispatch of `rows` rows, `units` dots a row and n_tok
    // tokens, in the layout its type and size take: tiles (tiles_), an
    // invocation per dot (serial_) or a workgroup per row; sets p.serial.
    void record_layout(VkCommandBuffer cb, VulkanKernel& k, const std::vector<const VulkanBuffer*>& buffers,
                       VulkanMatmulParams& p, QuantType type, int64_t rows, int64_t units, int n_tok,
                       bool then_barrier);
    // The unit dots of wo or w_down into dots_ (dot_units_ per row).
    void record_dots(VkCommandBuffer cb, const DeviceMatrix& w, const VulkanBuffer& act, int n_tok, int64_t unit_cols);
    // x_ += the dots' exact sum (a whole layer), or the sum into partial_ (a share).
    // (through the post-norm where the layer has one).
    void record_add_dots(VkCommandBuffer cb, int n_tok, const VulkanBuffer* post_norm, const VulkanBuffer* bias = nullptr);
    // add_units' and sum_units' buffers, writing to `out`.
    std::vector<const VulkanBuffer*> unit_buffers(const VulkanBuffer& out) const;
    void record_sum(VkCommandBuffer cb, int n_tok, const VulkanBuffer& out, bool as_float);
    const LayerWeights& layer_weights(int layer) const;
    // A layer's attention (from x_ to the dots of wo) and FFN (to the dots of w_down).
    void record_attention(VkCommandBuffer cb, int layer, int n_tok);
    void record_ffn(VkCommandBuffer cb, int layer, int n_tok);
    void record_layer(VkCommandBuffer cb, int layer, int n_tok);
    // A mixture of experts' FFN: the norm and router (read back), the host's
    // choice, then the chosen experts' products.
    void record_router(VkCommandBuffer cb, int layer, int n_tok);
    void choose_experts(int layer, int n_tok);
    void record_experts(VkCommandBuffer cb, int layer, int n_tok);
    // The head's rows of h into logits_, and read back with the bias.
    void record_head(VkCommandBuffer cb, const VulkanBuffer& h, int n_tok);
    void read_head(int n_tok, float* logits, int64_t stride);
    void check_rows(int n_tok) const;
    void new_input();  // the next products read a new input: convert it anew
    void emit_bands();
    // The batch rows' sequences and positions (rows_), and each RoPE
    // table's cos/sin of them.
    void prepare_rows(std::span<const SeqRun> runs);
    void prepare_sparse_rows(std::span<const SeqRun> runs);
    void update_landmarks(const Layer& l, int seq, int head, std::span<const int> kept,
                          const std::vector<uint8_t>& k_rows, const std::vector<uint8_t>& v_rows);
    void prepare_rope(std::span<const int> positions);

    ModelHParams hparams_;
    SliceWeights weights_;
    ReductionUnits units_;
    int n_ctx_ = 0, n_batch_ = 0, n_seq_ = 1;
    KvCacheTypes kv_types_;
    std::unique_ptr<VulkanContext> context_;
    std::unique_ptr<Kernels> kernels_;
    uint64_t device_bytes_ = 0;
    std::vector<Layer> layers_;
    std::unique_ptr<VulkanBuffer> output_norm_;
    DeviceMatrix output_;
    // Scratch for n_batch rows.
    bool serial_ = false;  // products an invocation per dot (gpu/shaders.h's serial_products)
    ProductTiles tiles_ = ProductTiles::kNone;  // which block products run in tiles (gpu/shaders.h)
    int n_kv_ = 0, n_q_heads_ = 0;  // this share's KV and query heads
    int64_t q_begin_ = 0, q_width_ = 0, kv_begin_ = 0, kv_width_ = 0, n_ffn_ = 0;
    int64_t dot_units_ = 1;    // unit dots per row in dots_
    int64_t dot_experts_ = 1;  // dot rows per token in dots_ (a mixture of experts' k)
    std::unique_ptr<VulkanBuffer> router_logits_, expert_scale_, chosen_;  // host memory: router rows, choices' weights and ids
    const VulkanBuffer* down_bias_ = nullptr;  // the experts' down biases the dots' sum joins (gpt-oss)
    std::unique_ptr<VulkanBuffer> unused_;
    std::map<QuantType, std::unique_ptr<VulkanBuffer>> grid_tables_;  // the grid I-quants' points and sign masks
    // A product's buffers: weights, activations, output (and a grid type's tables).
    std::vector<const VulkanBuffer*> product_buffers(const DeviceMatrix& w, const VulkanBuffer& act,
                                                     const VulkanBuffer& y) const;
    std::unique_ptr<VulkanBuffer> rows_;
    // Sparse attention (sparse_.enabled): each batch row's mode, window and
    // candidates (attention.comp's Sparse), in host memory; the landmarks
    // live in each dense layer's lm_k / lm_v.
    SparseOptions sparse_;
    std::unique_ptr<VulkanBuffer> sparse_rows_;
    int score_span_ = 0;  // floats of scores per row and head
    std::unique_ptr<VulkanBuffer> mass_;  // with track_attention: [sequence][position] 64-bit counters
    void reset_mass(std::span<const SeqRun> runs);  // host memory: each batch row's (sequence, position, index in run, run length)
    std::vector<float> router_rows_;
    std::vector<ExpertChoice> choices_;
    int bands_ = 1, first_band_ = 0;
    BandSink on_band_;
    std::unique_ptr<VulkanBuffer> partial_;
    std::unique_ptr<VulkanBuffer> out_;  // a layer's output as float, before its post-norm
    JoinScratch join_;  // a share's exact partial (doubles), read by the host
    std::unique_ptr<VulkanBuffer> x_, h_, q_, k_, v_, attn_, gate_, up_, dots_, scores_, act_q8_0_, act_q8_k_, logits_;
    int scores_rows_ = 0;  // rows of attention one dispatch holds scores for
    // Which input the Q8_0 / Q8_K activations hold in the recording.
    const VulkanBuffer* q8_0_of_ = nullptr;
    const VulkanBuffer* q8_k_of_ = nullptr;
    // One RoPE table per distinct (base, scale), each layer's, and their
    // cos/sin rows for the call's positions (host memory the device reads).
    std::vector<RopeTable> ropes_;
    std::vector<int> rope_of_layer_;
    std::vector<std::unique_ptr<VulkanBuffer>> rope_cos_, rope_sin_;
};

// A tensor-parallel rank on device `device_index`: its partials meet the
// group's at every layer, so all of its layers stay on the device, and
// --gpu-layers (`gpu_layers`) short of them is refused by name.
std::unique_ptr<RankRunner> make_vulkan_rank(const LlamaModel& model, const Slice& slice, const ForwardConfig& config,
                                             int device_index, int gpu_layers);

}  // namespace tessera
