// A slice whose first layers run on a Vulkan device and the rest on this
// process's CPU (--gpu-layers N, for a GPU whose memory holds only part of
// the share): the residual rows cross from the device to the CPU once per
// call, at the split. Both halves follow the canonical order, so the output
// is a single CPU node's, bit for bit, wherever the split falls.
#pragma once

#include "gpu_model/vulkan_slice_forward.h"
#include "model/slice_forward.h"
#include "util/thread_pool.h"

#include <memory>

namespace tessera {

class SplitLayers : public SliceRunner {
public:
    // The first min(gpu_layers, slice's layers) layers of `slice` on Vulkan
    // device `device_index`, the rest on the CPU with n_threads threads.
    SplitLayers(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, int device_index,
                int gpu_layers, int n_threads);

    const ModelHParams& hparams() const override { return hparams_; }
    const Slice& slice() const override { return slice_; }
    int n_ctx() const override { return n_ctx_; }
    int n_batch() const override { return n_batch_; }
    int check_runs(std::span<const SeqRun> runs) const override;
    void embed(std::span<const int32_t> tokens, float* x) const override;
    void forward_layers(float* x, int pos0, int n_tok) override;
    void forward_layers(float* x, std::span<const SeqRun> runs) override;
    int n_seq() const override { return n_seq_; }
    void logits(const float* x, int n_tok, float* logits) override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;

    // The device's part (null when it holds no layer).
    const VulkanSliceForward* device_part() const { return gpu_.get(); }

private:
    // The part that computes the slice's ends (the CPU's when it has layers).
    SliceRunner& last() const;

    ModelHParams hparams_;
    Slice slice_;
    int n_ctx_ = 0, n_batch_ = 0, n_seq_ = 1;
    std::unique_ptr<VulkanSliceForward> gpu_;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<SliceForward> cpu_;
};

}  // namespace tessera
