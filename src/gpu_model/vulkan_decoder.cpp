#include "gpu_model/vulkan_decoder.h"

namespace tessera {

VulkanDecoder::VulkanDecoder(const LlamaModel& model, const ForwardConfig& config, int device_index, int gpu_layers,
                             int n_threads)
    : forward_(model, full_slice(model.hparams()), config, device_index, gpu_layers, n_threads) {}

const float* VulkanDecoder::eval(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, false};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
}

const float* VulkanDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, true};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
}

const float* VulkanDecoder::eval_seqs(std::span<const SeqEval> evals) {
    return eval_whole_model(forward_, evals, scratch_);
}

}  // namespace tessera
