// A mixture of experts' FFN (model/architecture.h) in the slice forward pass.
//
// Each row's router logits (ffn_gate_inp · h) pick its experts and their
// weights (model/moe_router.h). An expert's gate/up rows are a band of the
// stacked matrices, its down product a band of down_exps' rows over the
// slice's channel units. The weight multiplies the expert's gated activation
// before its conversion for down (a linear product: the same as weighting its
// output), so each expert's product is a column-split product like a dense
// w_down's (ops/matmul.h matmul_units): its units' grid sums add into the
// partial exactly, in any order and over any split of the units.
//
// One position (generation) reads only its k experts' rows: their gate and up
// products in one pool dispatch, their gating in one, their down products in one. A batch (prefill) takes each expert in turn
// with every row routed to it, so each expert's weights are read once per
// batch, and a row's bits are the same in any batch (every product is per row).
#include "model/moe_router.h"
#include "model/slice_forward.h"
#include "ops/fixed_sum.h"
#include "ops/quant_traits.h"
#include "ops/row_groups.h"
#include "util/mapped_file.h"

#include <algorithm>

namespace tessera {

namespace {

// Asks the kernel to read rows [r0, r1) of m now (of a grouped matrix: their
// groups of 16 in every column panel).
void prefetch_rows(const Matrix& m, int64_t r0, int64_t r1) {
    if (!m.grouped) {
        advise_will_need(m.row(r0), m.row_bytes * static_cast<uint64_t>(r1 - r0));
        return;
    }
    const int64_t g0 = (r0 - m.row_begin) / kGroupRows, g1 = (r1 - m.row_begin + kGroupRows - 1) / kGroupRows;
    const GroupPanels panels{m.type, m.cols, m.panel_cols, (m.rows + kGroupRows - 1) / kGroupRows};
    for (int64_t p = 0; p < panels.count(); ++p) {
        advise_will_need(m.data + panels.offset(p) + static_cast<uint64_t>(g0) * panels.group_bytes(p),
                         static_cast<uint64_t>(g1 - g0) * panels.group_bytes(p));
    }
}

}  // namespace

void SliceForward::gate_rows(const Matrix& down, float* gate, const float* up, int64_t n_ffn, int n_tok,
                             const float* row_scale, QuantizedActivation& act) {
    // Chunks are whole blocks of every activation type (32 and 256 values),
    // so the result is the same as converting the rows whole.
    constexpr int64_t kChunk = 512;
    act.prepare(n_ffn, require_compute_traits(down.type, "matrix").vec_dot_type, n_tok);
    const int64_t per_row = (n_ffn + kChunk - 1) / kChunk;
    pool_.parallel_for(per_row * n_tok, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
            const int64_t t = c / per_row;
            const int64_t i0 = c % per_row * kChunk;
            const int64_t i1 = std::min(n_ffn, i0 + kChunk);
            float* g = gate + t * n_ffn;
            gated(hparams_.family->activation, g + i0, up + t * n_ffn + i0, i1 - i0);
            if (row_scale != nullptr) {
                const float s = row_scale[t];
                for (int64_t i = i0; i < i1; ++i) g[i] *= s;
            }
            act.quantize_span(g, t, i0, i1);
        }
    });
}

void SliceForward::note_expert_choices(int layer, std::span<const ExpertChoice> choices, int n_tok, int k) {
    if (recent_experts_.empty()) recent_experts_.resize(static_cast<size_t>(weights_.layers.size()));
    std::vector<int>& recent = recent_experts_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    ExpertReuse& reuse = n_tok == 1 ? reuse_ : prompt_reuse_;
    const auto kk = static_cast<size_t>(k);
    const size_t keep = kk * kRecentTokens;
    for (int t = 0; t < n_tok; ++t) {
        const std::span<const ExpertChoice> token = choices.subspan(static_cast<size_t>(t) * kk, kk);
        for (const ExpertChoice& c : token) {
            ++reuse.choices;
            // The previous token's experts are the last k entries.
            const auto previous_begin =
                recent.size() >= kk ? recent.end() - static_cast<std::ptrdiff_t>(kk) : recent.begin();
            if (std::find(previous_begin, recent.end(), c.expert) != recent.end()) ++reuse.previous;
            if (std::find(recent.begin(), recent.end(), c.expert) != recent.end()) ++reuse.recent;
        }
        for (const ExpertChoice& c : token) recent.push_back(c.expert);
        if (recent.size() > keep) recent.erase(recent.begin(), recent.end() - static_cast<std::ptrdiff_t>(keep));
    }
}

uint64_t SliceForward::streamed_bytes_per_token() const {
    uint64_t bytes = weights_.streamed ? weights_.streamed->streamed_bytes() : 0;
    if (hparams_.has_experts()) {
        bytes += weights_.mapped_expert_bytes * static_cast<uint64_t>(hparams_.n_expert_used) /
                 static_cast<uint64_t>(hparams_.n_expert);
    }
    return bytes;
}

void SliceForward::moe_ffn_partial(int layer, const float* h, int n_tok, double* partial) {
    const LayerWeights& w = layer_weights(layer);
    const Slice& s = weights_.slice;
    const int64_t n_embd = hparams_.n_embd;
    const int n_expert = hparams_.n_expert, k = hparams_.n_expert_used;
    const auto rows_of = [](int64_t n) { return static_cast<size_t>(n); };
    MoeScratch& m = moe_;
    m.logits.resize(rows_of(n_tok) * rows_of(n_expert));
    std::fill(partial, partial + n_tok * n_embd, 0.0);

    // The router: every row's choices.
    new_activations();
    matmul(w.router, {0, n_expert, 0, n_embd}, activation_for(w.router, h, n_embd, n_tok), m.logits.data(), n_expert,
           pool_);
    std::vector<ExpertChoice>& choices = m.choices;
    choices.resize(rows_of(n_tok) * rows_of(k));
    for (int t = 0; t < n_tok; ++t) {
        if (!w.router_bias.empty()) {
            float* l = m.logits.data() + rows_of(t) * rows_of(n_expert);
            for (int e = 0; e < n_expert; ++e) l[e] += w.router_bias[rows_of(e)];
        }
        route_token(*hparams_.family, std::span<float>(m.logits.data() + rows_of(t) * rows_of(n_expert), rows_of(n_expert)),
                    std::span<ExpertChoice>(choices.data() + rows_of(t) * rows_of(k), rows_of(k)));
    }
    note_expert_choices(layer, choices, n_tok, k);
    if (n_tok > 1) {
        // A batch: the rows routed to each expert (counting sort, rows
        // ascending), once for every part.
        m.first.assign(rows_of(n_expert) + 1, 0);
        for (const ExpertChoice& c : choices) ++m.first[rows_of(c.expert) + 1];
        for (int e = 0; e < n_expert; ++e) m.first[rows_of(e) + 1] += m.first[rows_of(e)];
        m.rows.resize(choices.size());
        m.scale.resize(choices.size());
        m.fill.assign(m.first.begin(), m.first.end() - 1);
        for (int t = 0; t < n_tok; ++t) {
            for (int i = 0; i < k; ++i) {
                const ExpertChoice& c = choices[rows_of(t) * rows_of(k) + rows_of(i)];
                const int32_t at = m.fill[rows_of(c.expert)]++;
                m.rows[rows_of(at)] = t;
                m.scale[rows_of(at)] = c.weight;
            }
        }
    }
    // The slice's parts (one; two in the mixed split), each its experts'
    // channels with matrices of its own; every expert is in one part at most.
    const std::vector<ExpertPart> parts = expert_parts(s);
    for (size_t i = 0; i < parts.size(); ++i) {
        const ExpertMatrices part = i == 0 ? ExpertMatrices{&w.gate_exps, &w.up_exps, &w.down_exps, w.expert_rows,
                                                            w.expert_first, w.experts_mapped, parts[i]}
                                           : ExpertMatrices{&w.tails[i - 1].gate, &w.tails[i - 1].up, &w.tails[i - 1].down,
                                                            w.tails[i - 1].rows, w.tails[i - 1].first, w.experts_mapped,
                                                            parts[i]};
        expert_part_partial(w, part, h, n_tok, partial);
    }
}

void SliceForward::expert_part_partial(const LayerWeights& w, const ExpertMatrices& x, const float* h, int n_tok,
                                       double* partial) {
    const ExpertPart& s = x.part;
    const int64_t n_embd = hparams_.n_embd, n_ff = hparams_.n_ff, n_ffn = s.n_ffn();
    const int k = hparams_.n_expert_used;
    const auto rows_of = [](int64_t n) { return static_cast<size_t>(n); };
    MoeScratch& m = moe_;
    const std::vector<ExpertChoice>& choices = m.choices;
    // The part's channels of expert e: rows of the whole stacked matrix, or
    // of a rank's packed share (llama_model.h).
    const int64_t per_expert = x.rows, first = x.first;
    const auto gate_rect = [&](int e) { return MatRect{e * per_expert + first, e * per_expert + first + n_ffn, 0, n_embd}; };
    const auto down_rect = [&](int e) { return MatRect{e * n_embd, (e + 1) * n_embd, s.ffn_begin, n_ffn}; };
    // Expert e's factor of each product (NVFP4 files' per-expert scales), 1 without.
    const auto factor = [](const std::vector<float>& scales, int e) {
        return scales.empty() ? 1.0f : scales[static_cast<size_t>(e)];
    };
    // Expert e's gate and up biases (gpt-oss) on `count` rows of the part's channels.
    const auto add_gate_up_bias = [&](int e, float* gate, float* up, int64_t count) {
        if (w.gate_exps_bias.empty() && w.up_exps_bias.empty()) return;
        const size_t b0 = rows_of(e) * rows_of(n_ff) + rows_of(s.ffn_begin);
        for (int64_t r = 0; r < count; ++r) {
            for (int64_t i = 0; i < n_ffn; ++i) {
                if (!w.gate_exps_bias.empty()) gate[r * n_ffn + i] += w.gate_exps_bias[b0 + rows_of(i)];
                if (!w.up_exps_bias.empty()) up[r * n_ffn + i] += w.up_exps_bias[b0 + rows_of(i)];
            }
        }
    };
    // Expert e's down products y (count rows) added into the partial's rows
    // `rows`, each with its weight times the expert's down bias (gpt-oss)
    // where the part holds channel 0: once in any plan, on the grid
    // (ops/fixed_sum.h), so it adds exactly as the units do.
    const auto add_expert_rows = [&](int e, const double* y, int64_t count, const int32_t* rows, const float* weights) {
        const bool bias = !w.down_exps_bias.empty() && s.ffn_begin == 0;
        const float* b = bias ? w.down_exps_bias.data() + rows_of(e) * rows_of(n_embd) : nullptr;
        for (int64_t i = 0; i < count; ++i) {
            double* p = partial + static_cast<int64_t>(rows[i]) * n_embd;
            const double* yi = y + i * n_embd;
            for (int64_t j = 0; j < n_embd; ++j) p[j] += yi[j];
            if (bias) {
                for (int64_t j = 0; j < n_embd; ++j) p[j] += snap_to_grid(weights[i] * b[j]);
            }
        }
    };
    // One expert's down product over the rows of `act`, added as above.
    const auto down_into_partial = [&](int e, QuantizedActivation& act, std::span<const int32_t> rows,
                                       const float* weights) {
        const auto count = static_cast<int64_t>(rows.size());
        m.y.resize(rows_of(count) * rows_of(n_embd));
        matmul_units(*x.down, down_rect(e), act, units_.ffn_channels, m.y.data(), n_embd, pool_,
                     factor(w.down_exps_scale, e));
        add_expert_rows(e, m.y.data(), count, rows.data(), weights);
    };
    // Experts streamed one by one (larger than memory: llama_model.h): ask
    // for the chosen ones' rows at once, so the disk reads them in parallel
    // while the first products start.
    const auto prefetch = [&](int e) {
        if (!x.mapped) return;
        prefetch_rows(*x.gate, e * per_expert + first, e * per_expert + first + n_ffn);
        prefetch_rows(*x.up, e * per_expert + first, e * per_expert + first + n_ffn);
        prefetch_rows(*x.down, e * n_embd, (e + 1) * n_embd);
    };
    const int32_t row0 = 0;
    if (m.acts.size() < rows_of(k)) m.acts.resize(rows_of(k));

    if (n_tok == 1) {
        // Generation: the k experts' gate and up products in one dispatch
        // (of the experts this part holds, on a dealt part those of its
        // turns: n of them).
        std::vector<ExpertChoice>& chosen = m.chosen;
        chosen.clear();
        for (int i = 0, in_part = 0; i < k; ++i) {
            if (s.contains(choices[rows_of(i)].expert) && s.my_turn(in_part++)) chosen.push_back(choices[rows_of(i)]);
        }
        const int n = static_cast<int>(chosen.size());
        if (n == 0) return;
        for (int i = 0; i < n; ++i) prefetch(chosen[rows_of(i)].expert);
        m.gate.resize(rows_of(n) * rows_of(n_ffn));
        m.up.resize(m.gate.size());
        std::vector<MatmulJob>& jobs = m.jobs;
        jobs.clear();
        for (int i = 0; i < n; ++i) {
            const int e = chosen[rows_of(i)].expert;
            jobs.push_back({x.gate, gate_rect(e), m.gate.data() + i * n_ffn, n_ffn, factor(w.gate_exps_scale, e)});
            jobs.push_back({x.up, gate_rect(e), m.up.data() + i * n_ffn, n_ffn, factor(w.up_exps_scale, e)});
        }
        new_activations();
        for (size_t j = 0; j < jobs.size(); j += kMatmulManyMaxJobs) {
            run_jobs(std::span<const MatmulJob>(jobs).subspan(j, std::min(kMatmulManyMaxJobs, jobs.size() - j)), h, n_embd, 1);
        }
        // Then every expert's gating in one dispatch (a row each) and their
        // down products in another, each row's bits as alone.
        m.scale.resize(rows_of(n));
        for (int i = 0; i < n; ++i) {
            add_gate_up_bias(chosen[rows_of(i)].expert, m.gate.data() + i * n_ffn, m.up.data() + i * n_ffn, 1);
            m.scale[rows_of(i)] = chosen[rows_of(i)].weight;
        }
        gate_rows(*x.down, m.gate.data(), m.up.data(), n_ffn, n, m.scale.data(), m.acts[0]);
        m.y.resize(rows_of(n) * rows_of(n_embd));
        m.down_jobs.clear();
        for (int i = 0; i < n; ++i) {
            const int e = chosen[rows_of(i)].expert;
            m.down_jobs.push_back({down_rect(e), i, m.y.data() + i * n_embd, factor(w.down_exps_scale, e)});
        }
        for (size_t j = 0; j < m.down_jobs.size(); j += kMatmulManyMaxJobs) {
            matmul_units_many(*x.down,
                              std::span<const UnitsJob>(m.down_jobs).subspan(j, std::min(kMatmulManyMaxJobs, m.down_jobs.size() - j)),
                              m.acts[0], units_.ffn_channels, pool_);
        }
        for (int i = 0; i < n; ++i) add_expert_rows(chosen[rows_of(i)].expert, m.y.data() + i * n_embd, 1, &row0,
                                                    m.scale.data() + i);
        return;
    }

    // A batch: the rows routed to each expert (moe_ffn_partial sorted them);
    // on a dealt part, of the experts with rows, this rank's turns.
    const auto routed = [&](int e) { return m.first[rows_of(e)] < m.first[rows_of(e) + 1]; };
    for (int e = s.expert_begin, in_part = 0; e < s.expert_end; ++e) {
        if (routed(e) && s.my_turn(in_part++)) prefetch(e);
    }
    for (int e = s.expert_begin, in_part = 0; e < s.expert_end; ++e) {
        if (!routed(e) || !s.my_turn(in_part++)) continue;
        const int32_t begin = m.first[rows_of(e)], end = m.first[rows_of(e) + 1];
        const int count = end - begin;
        m.h.resize(rows_of(count) * rows_of(n_embd));
        for (int i = 0; i < count; ++i) {
            std::copy_n(h + static_cast<int64_t>(m.rows[rows_of(begin + i)]) * n_embd, n_embd,
                        m.h.data() + static_cast<int64_t>(i) * n_embd);
        }
        m.gate.resize(rows_of(count) * rows_of(n_ffn));
        m.up.resize(m.gate.size());
        const MatmulJob jobs[] = {{x.gate, gate_rect(e), m.gate.data(), n_ffn, factor(w.gate_exps_scale, e)},
                                  {x.up, gate_rect(e), m.up.data(), n_ffn, factor(w.up_exps_scale, e)}};
        new_activations();
        run_jobs(jobs, m.h.data(), n_embd, count);
        add_gate_up_bias(e, m.gate.data(), m.up.data(), count);
        gate_rows(*x.down, m.gate.data(), m.up.data(), n_ffn, count, m.scale.data() + begin, m.acts[0]);
        down_into_partial(e, m.acts[0], std::span<const int32_t>(m.rows.data() + begin, rows_of(count)),
                          m.scale.data() + begin);
    }
}

}  // namespace tessera
