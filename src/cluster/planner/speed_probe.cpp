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

// What a token's FFN reads of gate and up in one layer: the whole matrices,
// or, in a mixture of experts, its k experts' rows (the first k, stacked).
struct ProbeMatrix {
    const Matrix* m;
    int64_t rows;
};
std::vector<ProbeMatrix> probe_matrices(const LayerWeights& l, const ModelHParams& hp) {
    if (hp.has_experts()) {
        const int64_t rows = static_cast<int64_t>(hp.n_expert_used) * hp.n_ff;
        return {{&l.gate_exps, rows}, {&l.up_exps, rows}};
    }
    return {{&l.w_gate, l.w_gate.rows}, {&l.w_up, l.w_up.rows}};
}

uint64_t probe_layer_bytes(const LayerWeights& l, const ModelHParams& hp) {
    uint64_t bytes = 0;
    for (const ProbeMatrix& p : probe_matrices(l, hp)) bytes += p.m->row_bytes * static_cast<uint64_t>(p.rows);
    return bytes;
}

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
    const uint64_t per_layer = probe_layer_bytes(l, hp);
    s.layer_end = static_cast<int32_t>(
        std::clamp<uint64_t>((kProbeBytes + per_layer - 1) / std::max<uint64_t>(per_layer, 1), 1, hp.n_layer));
    return s;
}

}  // namespace

double probe_seconds(const LlamaModel& model, ThreadPool& pool) {
    const ModelHParams& hp = model.hparams();
    const SliceWeights w = load_slice_weights(model, probe_slice(model));
    if (w.layers.empty()) return 1.0;
    const int64_t max_rows = static_cast<int64_t>(std::max(hp.n_expert_used, 1)) * hp.n_ff;
    std::vector<float> x(static_cast<size_t>(hp.n_embd), 0.5f), y(2 * static_cast<size_t>(max_rows));
    QuantizedActivation xq;
    xq.quantize(x.data(), hp.n_embd,
                require_compute_traits(probe_matrices(w.layers[0], hp)[0].m->type, "probe").vec_dot_type);
    double best = 1e30;
    // Best of several sweeps over at least 50 ms: the first ones fault pages
    // in, and a freshly started process may share its cores for a moment.
    const double until = now_seconds() + 0.05;
    for (int rep = 0; rep < 3 || (now_seconds() < until && rep < 1000); ++rep) {
        const double start = now_seconds();
        for (const LayerWeights& l : w.layers) {
            int64_t at = 0;
            for (const ProbeMatrix& p : probe_matrices(l, hp)) {
                matmul(*p.m, {0, p.rows, 0, p.m->cols}, xq, y.data() + at, p.rows, pool);
                at += p.rows;
            }
        }
        best = std::min(best, now_seconds() - start);
    }
    // The probe is not this node's share: give back what it read.
    for (const LayerWeights& l : w.layers) {
        for (const ProbeMatrix& p : probe_matrices(l, hp)) {
            release_pages(p.m->data, p.m->row_bytes * static_cast<uint64_t>(p.rows));
        }
    }
    // Per layer, as the step budgets built on it expect.
    return std::max(best / static_cast<double>(w.layers.size()), 1e-9);
}

uint64_t probe_bytes(const LlamaModel& model) {
    const SliceWeights w = load_slice_weights(model, probe_slice(model));
    uint64_t bytes = 0;
    for (const LayerWeights& l : w.layers) bytes += probe_layer_bytes(l, model.hparams());
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
