#include "gpu_model/split_layers.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

SplitLayers::SplitLayers(const LlamaModel& model, const Slice& slice, const ForwardConfig& config, int device_index,
                         int gpu_layers, int n_threads)
    : hparams_(model.hparams()), slice_(slice), n_ctx_(config.n_ctx),
      n_batch_(std::clamp(config.n_batch, 1, std::max(1, config.n_ctx))), n_seq_(config.n_seq) {
    validate_slice(slice, hparams_);
    if (gpu_layers < 0) throw make_error("--gpu-layers {}: a count of layers, 0 or more", gpu_layers);
    const int on_gpu = std::min(gpu_layers, slice.n_layers());
    const int split = slice.layer_begin + on_gpu;
    if (on_gpu > 0) {
        Slice front = slice;
        front.layer_end = split;
        front.outputs = split == slice.layer_end && slice.outputs;
        gpu_ = std::make_unique<VulkanSliceForward>(model, front, config, device_index);
    }
    if (split < slice.layer_end || on_gpu == 0) {
        Slice back = slice;
        back.layer_begin = split;
        pool_ = std::make_unique<ThreadPool>(n_threads);
        cpu_ = std::make_unique<SliceForward>(model, back, config, *pool_);
    }
}

SliceRunner& SplitLayers::last() const {
    return cpu_ ? static_cast<SliceRunner&>(*cpu_) : static_cast<SliceRunner&>(*gpu_);
}

int SplitLayers::check_runs(std::span<const SeqRun> runs) const {
    if (gpu_) gpu_->check_runs(runs);
    return last().check_runs(runs);
}

void SplitLayers::embed(std::span<const int32_t> tokens, float* x) const {
    if (gpu_) {
        gpu_->embed(tokens, x);
    } else {
        cpu_->embed(tokens, x);
    }
}

void SplitLayers::forward_layers(float* x, int pos0, int n_tok) {
    if (gpu_) gpu_->forward_layers(x, pos0, n_tok);
    if (cpu_) cpu_->forward_layers(x, pos0, n_tok);
}

void SplitLayers::forward_layers(float* x, std::span<const SeqRun> runs) {
    if (gpu_) gpu_->forward_layers(x, runs);
    if (cpu_) cpu_->forward_layers(x, runs);
}

void SplitLayers::logits(const float* x, int n_tok, float* logits) { last().logits(x, n_tok, logits); }

void SplitLayers::compact_context(int seq, std::span<const int> kept, int n_used) {
    if (gpu_) gpu_->compact_context(seq, kept, n_used);  // refused: before the CPU's cache changes
    if (cpu_) cpu_->compact_context(seq, kept, n_used);
}

void SplitLayers::add_attention_mass(int seq, int n_used, int64_t* totals) {
    if (gpu_) gpu_->add_attention_mass(seq, n_used, totals);
    if (cpu_) cpu_->add_attention_mass(seq, n_used, totals);
}

}  // namespace tessera
