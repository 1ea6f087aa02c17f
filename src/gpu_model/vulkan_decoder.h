// A single process whose whole model runs on a Vulkan device (run, bench,
// perplexity, serve with --device vulkan[:N]): tokens embedded on the CPU,
// every layer and the head on the device, the logits read back.
#pragma once

#include "gpu_model/vulkan_slice_forward.h"
#include "model/decoder.h"
#include "model/seq_batches.h"

namespace tessera {

class VulkanDecoder : public Decoder {
public:
    VulkanDecoder(const LlamaModel& model, const ForwardConfig& config, int device_index);

    const ModelHParams& hparams() const override { return forward_.hparams(); }
    int n_ctx() const override { return forward_.n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override {
        forward_.compact_context(seq, kept, n_used);
    }

    const VulkanSliceForward& forward() const { return forward_; }

private:
    VulkanSliceForward forward_;
    WholeModelScratch scratch_;
};

}  // namespace tessera
