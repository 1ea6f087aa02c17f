#include "gpu_model/vulkan_probe.h"

#include "gpu_model/vulkan_slice_forward.h"
#include "util/timer.h"

#include <algorithm>
#include <vector>

namespace tessera {

namespace {
// Enough layers that a step is more than the device's fixed cost of a submission.
constexpr uint64_t kProbeBytes = 64ull << 20;

uint64_t bytes_of(const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; }
}  // namespace

double vulkan_probe_seconds(const LlamaModel& model, int device_index) {
    const ModelHParams& hp = model.hparams();
    Slice probe = full_slice(hp);
    probe.embeds = false;
    probe.outputs = false;
    probe.vocab_end = 0;
    probe.layer_end = std::min(1, hp.n_layer);
    const SliceWeights one = load_slice_weights(model, probe);
    if (one.layers.empty()) return 1.0;
    const LayerWeights& l = one.layers[0];
    const uint64_t gate_up = bytes_of(l.w_gate) + bytes_of(l.w_up);
    const uint64_t layer = gate_up + bytes_of(l.w_down) + bytes_of(l.wq) + bytes_of(l.wk) + bytes_of(l.wv) + bytes_of(l.wo);
    probe.layer_end = static_cast<int32_t>(std::clamp<uint64_t>(kProbeBytes / std::max<uint64_t>(layer, 1), 1, hp.n_layer));
    ForwardConfig config;
    config.n_ctx = 8;
    config.n_batch = 1;
    VulkanSliceForward forward(model, probe, config, device_index);
    std::vector<float> x(static_cast<size_t>(hp.n_embd), 0.5f);
    double best = 1e30;
    const double until = now_seconds() + 0.05;
    for (int rep = 0; rep < 3 || (now_seconds() < until && rep < 200); ++rep) {
        std::fill(x.begin(), x.end(), 0.5f);
        const double start = now_seconds();
        forward.forward_layers(x.data(), 0, 1);
        best = std::min(best, now_seconds() - start);
    }
    const double per_layer = best / static_cast<double>(probe.n_layers());
    return std::max(per_layer * static_cast<double>(gate_up) / static_cast<double>(std::max<uint64_t>(layer, 1)), 1e-9);
}

}  // namespace tessera
