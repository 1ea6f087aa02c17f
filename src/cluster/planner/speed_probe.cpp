#include "cluster/planner/speed_probe.h"

#include "ops/matmul.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/timer.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

// The probe reads more than a last-level cache holds, so it times the rate
// weights stream from memory, as a token's step reads them, not a
// cache-resident best case (on this VM one cached layer of the 1.1B shape
// ran 1.8x faster than its tokens).
constexpr uint64_t kProbeBytes = 64ull << 20;

// Layers [0, n) whose gate and up matrices the probe multiplies.
Slice probe_slice(const LlamaModel& model) {
    const ModelHParams& hp = model.hparams();
    Slice s = full_slice(hp);
    s.embeds = false;
    s.outputs = false;
    s.vocab_end = 0;
    s.layer_end = std::min(1, hp.n_layer);
    const SliceWeights one = load_slice_weights(model, s);
    if (one.layers.empty()) return s;
    const LayerWeights& l = one.layers[0];
    const uint64_t per_layer = l.w_gate.row_bytes * static_cast<uint64_t>(l.w_gate.rows) +
                               l.w_up.row_bytes * static_cast<uint64_t>(l.w_up.rows);
    s.layer_end = static_cast<int32_t>(
        std::clamp<uint64_t>((kProbeBytes + per_layer - 1) / std::max<uint64_t>(per_layer, 1), 1, hp.n_layer));
    return s;
}

}  // namespace

double probe_seconds(const LlamaModel& model, ThreadPool& pool) {
    const ModelHParams& hp = model.hparams();
    const SliceWeights w = load_slice_weights(model, probe_slice(model));
    if (w.layers.empty()) return 1.0;
    std::vector<float> x(static_cast<size_t>(hp.n_embd), 0.5f), y(2 * static_cast<size_t>(hp.n_ff));
    QuantizedActivation xq;
    xq.quantize(x.data(), hp.n_embd, require_compute_traits(w.layers[0].w_gate.type, "probe").vec_dot_type);
    double best = 1e30;
    // Best of several sweeps over at least 50 ms: the first ones fault pages
    // in, and a freshly started process may share its cores for a moment.
    const double until = now_seconds() + 0.05;
    for (int rep = 0; rep < 3 || (now_seconds() < until && rep < 1000); ++rep) {
        const double start = now_seconds();
        for (const LayerWeights& l : w.layers) {
            matmul(l.w_gate, {0, l.w_gate.rows, 0, l.w_gate.cols}, xq, y.data(), hp.n_ff, pool);
            matmul(l.w_up, {0, l.w_up.rows, 0, l.w_up.cols}, xq, y.data() + hp.n_ff, hp.n_ff, pool);
        }
        best = std::min(best, now_seconds() - start);
    }
    // The probe is not this node's share: give back what it read.
    for (const LayerWeights& l : w.layers) {
        for (const Matrix* m : {&l.w_gate, &l.w_up}) release_pages(m->data, m->row_bytes * static_cast<uint64_t>(m->rows));
    }
    // Per layer, as the step budgets built on it expect.
    return std::max(best / static_cast<double>(w.layers.size()), 1e-9);
}

uint64_t probe_bytes(const LlamaModel& model) {
    const SliceWeights w = load_slice_weights(model, probe_slice(model));
    uint64_t bytes = 0;
    for (const LayerWeights& l : w.layers) {
        bytes += l.w_gate.row_bytes * static_cast<uint64_t>(l.w_gate.rows) + l.w_up.row_bytes * static_cast<uint64_t>(l.w_up.rows);
    }
    return std::max<uint64_t>(bytes / std::max<size_t>(w.layers.size(), 1), 1);
}

namespace {
constexpr double kEqualSpeed = 0.8;
}  // namespace

std::vector<double> weights_from_probes(std::span<const double> seconds) {
    double fastest = 1e30;
    for (double s : seconds) fastest = std::min(fastest, s);
    std::vector<double> weights;
    for (double s : seconds) {
        const double relative = fastest / s;
        weights.push_back(relative >= kEqualSpeed ? 1.0 : std::max(0.25, std::round(4.0 * relative) / 4.0));
    }
    return weights;
}

}  // namespace tessera
