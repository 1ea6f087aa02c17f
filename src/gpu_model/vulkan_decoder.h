// A single process whose model runs on a Vulkan device (run, bench,
// perplexity, serve with --device vulkan[:N]): tokens embedded on the CPU,
// the layers and the head on the device, the logits read back; with
// --gpu-layers N only the first N layers there and the rest on the CPU.
#pragma once

#include "gpu_model/split_layers.h"
#include "model/decoder.h"
#include "model/seq_batches.h"

#include <climits>

namespace tessera {

class VulkanDecoder : public Decoder {
public:
    VulkanDecoder(const LlamaModel& model, const ForwardConfig& config, int device_index, int gpu_layers = INT_MAX,
                  int n_threads = 1);

    const ModelHParams& hparams() const override { return forward_.hparams(); }
    int n_ctx() const override { return forward_.n_ctx(); }
    int n_seq() const override { return forward_.n_seq(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override {
        forward_.compact_context(seq, kept, n_used);
    }
    void add_attention_mass(int seq, int n_used, int64_t* totals) override {
        forward_.add_attention_mass(seq, n_used, totals);
    }

    const SplitLayers& forward() const { return forward_; }

private:
    SplitLayers forward_;
    WholeModelScratch scratch_;
};

}  // namespace tessera
