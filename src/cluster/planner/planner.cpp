#include "cluster/planner/planner.h"

#include "util/checked.h"

#include "ops/quant_traits.h"
#include "util/error.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <numeric>

namespace tessera {

std::vector<int> apportion(int n_units, std::span<const double> weights) {
    if (weights.empty()) throw make_error("a plan needs at least one node");
    double total = 0.0;
    for (double w : weights) {
        if (!(w > 0.0) || !std::isfinite(w)) throw make_error("node weight {} is not a positive number", w);
        total += w;
    }
    std::vector<int> shares(weights.size());
    std::vector<std::pair<double, size_t>> remainders;
    int given = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
        const double exact = n_units * weights[i] / total;
        shares[i] = static_cast<int>(std::floor(exact));
        given += shares[i];
        remainders.emplace_back(exact - shares[i], i);
    }
    // Largest remainders first; ties go to the lower rank, so plans are deterministic.
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; given < n_units; ++k, ++given) shares[remainders[k % remainders.size()].second]++;
    return shares;
}

std::vector<Slice> plan_tensor_parallel(const ModelHParams& hp, std::span<const double> weights,
                                        const ReductionUnits& units, MoeSplit split) {
    const int granule = units.ffn_channels;
    const int head_unit = units.kv_heads;
    if (granule < 1 || head_unit < 1) throw make_error("internal: reduction units {} / {}", head_unit, granule);
    const int n_granules = (hp.n_ff + granule - 1) / granule;
    const std::vector<int> heads = apportion((hp.n_head_kv + head_unit - 1) / head_unit, weights);
    const std::vector<int> granules = apportion(n_granules, weights);
    const std::vector<int> vocab = apportion((hp.n_vocab + kVocabGranule - 1) / kVocabGranule, weights);
    const bool by_experts = split == MoeSplit::kExperts && hp.has_experts();
    const std::vector<int> experts = by_experts ? apportion(hp.n_expert, weights) : std::vector<int>();
    // The mixed split: as many groups of experts as ranks (fewer where the
    // experts are fewer); group q's units are apportioned over the ranks in
    // turn from rank q (their weights rotated alike), so a remainder's unit
    // falls on another rank in each group. Where every rank gets as many
    // units of every group, the channel split itself.
    const size_t n_ranks = weights.size();
    std::vector<std::vector<ExpertPart>> mixed_parts(n_ranks);
    bool mixed = split == MoeSplit::kMixed && hp.has_experts() && hp.n_expert >= 2 && n_ranks >= 2;
    if (mixed) {
        const auto n_groups = static_cast<size_t>(
            std::min<int64_t>({static_cast<int64_t>(n_ranks), hp.n_expert, kMaxExpertParts}));
        const std::vector<int> group_size = apportion(hp.n_expert, std::vector<double>(n_groups, 1.0));
        bool even = true;
        int e0 = 0;
        for (size_t q = 0; q < n_groups; ++q) {
            std::vector<double> rotated(n_ranks);
            for (size_t i = 0; i < n_ranks; ++i) rotated[i] = weights[(q + i) % n_ranks];
            const std::vector<int> shares = apportion(n_granules, rotated);
            int u = 0;
            for (size_t i = 0; i < n_ranks; ++i) {
                const size_t r = (q + i) % n_ranks;
                even = even && shares[i] == granules[r];
                const int f0 = std::min(u * granule, hp.n_ff);
                u += shares[i];
                const int f1 = std::min(u * granule, hp.n_ff);
                if (f0 == f1 || group_size[q] == 0) continue;
                std::vector<ExpertPart>& parts = mixed_parts[r];
                // The previous group's part, if its channels are the same.
                if (!parts.empty() && parts.back().expert_end == e0 && parts.back().ffn_begin == f0 &&
                    parts.back().ffn_end == f1) {
                    parts.back().expert_end = e0 + group_size[q];
                } else {
                    parts.push_back({e0, e0 + group_size[q], f0, f1});
                }
            }
            e0 += group_size[q];
        }
        mixed = !even;
    }
    // The balanced split: the units that do not divide among the ranks
    // (n_granules % n_ranks: the last ones) are held by every rank and dealt
    // per token; the others are apportioned as the channel split's. Where
    // they divide, the channel split itself.
    const int shared_units = split == MoeSplit::kBalanced && hp.has_experts() && n_ranks >= 2
                                 ? n_granules % static_cast<int>(n_ranks)
                                 : 0;
    const bool balanced = shared_units > 0;
    std::vector<int> own_units;
    if (balanced) {
        own_units = apportion(n_granules - shared_units, weights);
        if (*std::min_element(own_units.begin(), own_units.end()) == 0) {
            throw make_error("--moe-split balanced: {} units of {} channels per expert leave a rank of these weights "
                             "with no units of its own (another split can: channels, experts or mixed)",
                             n_granules, granule);
        }
    }
    std::vector<Slice> slices(weights.size());
    int head = 0;
    int g = 0;
    int v = 0;
    int e = 0;
    for (size_t r = 0; r < weights.size(); ++r) {
        Slice& s = slices[r];
        s.layer_begin = 0;
        s.layer_end = hp.n_layer;
        s.kv_head_begin = std::min(head * head_unit, hp.n_head_kv);
        head += heads[r];
        s.kv_head_end = std::min(head * head_unit, hp.n_head_kv);
        if (balanced) {
            // Its own units of every expert, then the shared ones, its turns.
            s.ffn_begin = std::min(g * granule, hp.n_ff);
            g += own_units[r];
            s.ffn_end = std::min(g * granule, hp.n_ff);
            s.expert_begin = 0;
            s.expert_end = hp.n_expert;
            const int shared_begin = (n_granules - shared_units) * granule;
            s.tails.push_back({0, hp.n_expert, shared_begin, hp.n_ff, static_cast<int32_t>(n_ranks), static_cast<int32_t>(r)});
        } else if (mixed) {
            // Its first part, and the rest as tails; none: no FFN.
            const std::vector<ExpertPart>& parts = mixed_parts[r];
            const ExpertPart first = parts.empty() ? ExpertPart{} : parts[0];
            s.expert_begin = first.expert_begin, s.expert_end = first.expert_end;
            s.ffn_begin = first.ffn_begin, s.ffn_end = first.ffn_end;
            if (parts.size() > 1) s.tails.assign(parts.begin() + 1, parts.end());
        } else if (by_experts) {
            // Whole experts, every channel; a rank with none computes no FFN.
            s.expert_begin = e;
            e += experts[r];
            s.expert_end = e;
            s.ffn_begin = 0;
            s.ffn_end = s.n_experts() > 0 ? hp.n_ff : 0;
        } else {
            s.ffn_begin = std::min(g * granule, hp.n_ff);
            g += granules[r];
            s.ffn_end = std::min(g * granule, hp.n_ff);
            s.expert_begin = 0;
            s.expert_end = hp.n_expert;
        }
        s.vocab_begin = std::min(v * kVocabGranule, hp.n_vocab);
        v += vocab[r];
        s.vocab_end = std::min(v * kVocabGranule, hp.n_vocab);
        s.embeds = r == 0;
        s.outputs = r == 0;
    }
    return slices;
}

std::vector<std::pair<int, int>> plan_layer_blocks(int n_layer, std::span<const double> weights,
                                                   std::span<const int> counts) {
    if (weights.empty() && counts.empty()) throw make_error("a pipeline needs at least one stage");
    const size_t n_stages = counts.empty() ? weights.size() : counts.size();
    if (static_cast<int>(n_stages) > n_layer) {
        throw make_error("{} stages for a model of {} layers: at most one stage per layer", n_stages, n_layer);
    }
    std::vector<int> layers;
    if (!counts.empty()) {
        if (!weights.empty() && weights.size() != counts.size()) {
            throw make_error("{} layer counts given for {} stages", counts.size(), weights.size());
        }
        int total = 0;
        for (int c : counts) {
            if (c < 1) throw make_error("every stage needs at least one layer, got {}", c);
            total += c;
        }
        if (total != n_layer) throw make_error("the stages' layers add up to {}, the model has {}", total, n_layer);
        layers.assign(counts.begin(), counts.end());
    } else {
        layers = apportion(n_layer, weights);
        // Every stage holds at least one layer: take from the largest blocks.
        for (int& n : layers) {
            if (n == 0) {
                (*std::max_element(layers.begin(), layers.end()))--;
                n = 1;
            }
        }
    }
    std::vector<std::pair<int, int>> blocks;
    int layer = 0;
    for (int n : layers) {
        blocks.emplace_back(layer, layer + n);
        layer += n;
    }
    return blocks;
}

double expected_expert_load(const ModelHParams& hp, std::span<const double> weights, const ReductionUnits& units,
                            MoeSplit split) {
    if (!hp.has_experts()) return 0.0;
    const std::vector<Slice> slices = plan_tensor_parallel(hp, weights, units, split);
    // Each rank's share of each expert's channels (1: all of them), and its
    // dealt parts, whose share counts on its turns only.
    std::vector<std::vector<double>> held(slices.size(), std::vector<double>(static_cast<size_t>(hp.n_expert), 0.0));
    std::vector<std::vector<ExpertPart>> dealt(slices.size());
    for (size_t r = 0; r < slices.size(); ++r) {
        for (const ExpertPart& p : expert_parts(slices[r])) {
            if (p.dealt()) {
                dealt[r].push_back(p);
                continue;
            }
            for (int e = p.expert_begin; e < p.expert_end; ++e) {
                held[r][static_cast<size_t>(e)] += static_cast<double>(p.n_ffn()) / hp.n_ff;
            }
        }
    }
    const auto k = static_cast<size_t>(hp.n_expert_used);
    // The busiest rank's share of a token's k experts, over uniform routings.
    // A fixed sample of k-subsets (a seeded generator, so every node plans
    // alike); 4096 of them put the mean within about 1%. The channel split's
    // load is the same for every subset.
    constexpr int kSamples = 4096;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    const auto next = [&](uint64_t bound) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return (state >> 33) % bound;
    };
    std::vector<int> experts(static_cast<size_t>(hp.n_expert));
    std::vector<double> load(slices.size());
    double total = 0.0;
    for (int t = 0; t < kSamples; ++t) {
        std::iota(experts.begin(), experts.end(), 0);
        std::fill(load.begin(), load.end(), 0.0);
        for (int i = 0; i < hp.n_expert_used; ++i) {  // a partial Fisher-Yates shuffle: k distinct experts
            const auto j = static_cast<size_t>(i) + next(static_cast<uint64_t>(hp.n_expert - i));
            std::swap(experts[static_cast<size_t>(i)], experts[j]);
            const auto e = static_cast<size_t>(experts[static_cast<size_t>(i)]);
            for (size_t r = 0; r < slices.size(); ++r) load[r] += held[r][e];
        }
        for (size_t r = 0; r < slices.size(); ++r) {
            for (const ExpertPart& p : dealt[r]) {
                int in_part = 0;
                for (size_t i = 0; i < k; ++i) {
                    if (p.contains(experts[i]) && p.my_turn(in_part++)) load[r] += static_cast<double>(p.n_ffn()) / hp.n_ff;
                }
            }
        }
        double worst = 0.0;
        for (size_t r = 0; r < slices.size(); ++r) worst = std::max(worst, load[r] / weights[r]);
        total += worst;
    }
    return total / kSamples;
}

MoeSplit choose_moe_split(const ModelHParams& hp, std::span<const double> weights, const ReductionUnits& units,
                          bool allow_mixed) {
    if (!hp.has_experts() || weights.size() < 2) return MoeSplit::kChannels;
    // The least expected load; a tie keeps the simpler split (channels,
    // then whole experts). 1e-9: the channel split's samples sum the same
    // shares in another order than the mixed split's equal one.
    MoeSplit best = MoeSplit::kChannels;
    double least = expected_expert_load(hp, weights, units, best);
    for (const MoeSplit split : {MoeSplit::kExperts, MoeSplit::kMixed}) {
        if (split == MoeSplit::kMixed && !allow_mixed) continue;
        const double load = expected_expert_load(hp, weights, units, split);
        if (load < least - 1e-9) best = split, least = load;
    }
    return best;
}

bool shares_fit_hosts(std::span<const HostShare> shares) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> hosts;  // host -> (needed, free)
    for (const HostShare& s : shares) {
        auto [it, fresh] = hosts.try_emplace(s.host, 0, s.free_memory);
        it->second.first += s.need;
        it->second.second = std::min(it->second.second, s.free_memory);
    }
    for (const auto& [host, need_have] : hosts) {
        if (need_have.first + headroom_margin(need_have.second) > need_have.second) return false;
    }
    return true;
}

MoeSplit choose_moe_split_within_memory(const ModelHParams& hp, std::span<const double> weights,
                                        const ReductionUnits& units, bool allow_mixed, const GroupScope& scope,
                                        const std::function<bool(std::span<const Slice>)>& fits) {
    const MoeSplit chosen = choose_moe_split(hp, weights, units, allow_mixed);
    if (!hp.has_experts() || weights.size() < 2 || !allow_mixed) return chosen;
    std::vector<Slice> balanced;
    double load = 0.0;
    try {
        balanced = plan_group(hp, scope, weights, units, MoeSplit::kBalanced);
        load = expected_expert_load(hp, weights, units, MoeSplit::kBalanced);
    } catch (const Error&) {
        return chosen;  // a rank would hold no units of its own
    }
    // 1e-9 as in choose_moe_split: units that divide make it the channel split.
    if (load >= expected_expert_load(hp, weights, units, chosen) - 1e-9) return chosen;
    return fits(balanced) ? MoeSplit::kBalanced : chosen;
}

std::vector<Slice> plan_stage_group(const ModelHParams& hp, std::pair<int, int> layers,
                                    std::span<const double> group_weights, const ReductionUnits& units, bool first,
                                    bool last, MoeSplit split) {
    std::vector<Slice> slices = plan_tensor_parallel(hp, group_weights, units, split);
    for (Slice& s : slices) {
        s.layer_begin = layers.first;
        s.layer_end = layers.second;
        s.embeds = s.embeds && first;
        s.outputs = s.outputs && last;
        s.vocab_begin = 0;
        s.vocab_end = s.outputs ? hp.n_vocab : 0;
    }
    return slices;
}

std::vector<Slice> plan_group(const ModelHParams& hp, const GroupScope& scope, std::span<const double> weights,
                              const ReductionUnits& units, MoeSplit split) {
    return scope.whole_model ? plan_tensor_parallel(hp, weights, units, split)
                             : plan_stage_group(hp, scope.layers, weights, units, scope.first, scope.last, split);
}

SliceFootprint slice_footprint(const LlamaModel& model, const Slice& slice, int n_ctx, KvCacheTypes kv_types) {
    const ModelHParams& hp = model.hparams();
    const SliceWeights w = load_slice_weights(model, slice);
    const int64_t hd = hp.head_dim;
    const int64_t kv_rows = slice.n_kv_heads() * hd;
    const int64_t q_rows = kv_rows * hp.q_per_kv();
    SliceFootprint f;
    // wo and w_down are packed into private memory where the slice holds only
    // some of their columns (ColumnSlices::kPack): those never stream.
    const bool all_q = q_rows == static_cast<int64_t>(hp.n_head) * hd, all_ffn = slice.n_ffn() == hp.n_ff;
    uint64_t step_bytes = 0;  // what one token reads of the layers
    for (const LayerWeights& l : w.layers) {
        const uint64_t rows_split = static_cast<uint64_t>(q_rows) * l.wq.row_bytes +
                                    static_cast<uint64_t>(kv_rows) * (l.wk.row_bytes + l.wv.row_bytes) +
                                    static_cast<uint64_t>(slice.n_ffn()) * (l.w_gate.row_bytes + l.w_up.row_bytes);
        const uint64_t wo = static_cast<uint64_t>(l.wo.rows) * quant_row_bytes(l.wo.type, q_rows);
        const uint64_t down = static_cast<uint64_t>(l.w_down.rows) * quant_row_bytes(l.w_down.type, slice.n_ffn());
        // A mixture of experts holds its experts (every one, or whole ones of
        // the expert split) and the router; a token reads k of all n, so
        // k * n_local / n of them here on average.
        // Parts of every channel of their experts are views that may stream;
        // a share of the channels is packed, private.
        uint64_t experts = 0, experts_read = 0, experts_streamable = 0;
        if (hp.has_experts() && slice.n_ffn() > 0) {
            const uint64_t router = static_cast<uint64_t>(l.router.rows) * l.router.row_bytes;
            experts = experts_read = router;
            for (const ExpertPart& p : expert_parts(slice)) {
                const uint64_t per_expert =
                    static_cast<uint64_t>(p.n_ffn()) * (l.gate_exps.row_bytes + l.up_exps.row_bytes) +
                    static_cast<uint64_t>(hp.n_embd) * quant_row_bytes(l.down_exps.type, p.n_ffn());
                experts += per_expert * static_cast<uint64_t>(p.n_experts());
                if (p.n_ffn() == hp.n_ff) experts_streamable += per_expert * static_cast<uint64_t>(p.n_experts());
                // (A dealt part is read on this rank's turns only.)
                experts_read += per_expert * static_cast<uint64_t>(hp.n_expert_used) *
                                static_cast<uint64_t>(p.n_experts()) /
                                (static_cast<uint64_t>(hp.n_expert) * static_cast<uint64_t>(p.deal_count));
            }
        }
        f.weight_bytes += rows_split + wo + down + experts;
        step_bytes += rows_split + wo + down + experts_read;
        const uint64_t router = hp.has_experts() && slice.n_ffn() > 0 ? static_cast<uint64_t>(l.router.rows) * l.router.row_bytes : 0;
        const uint64_t streamable =
            rows_split + (all_q ? wo : 0) + (all_ffn ? down : 0) + experts_streamable + (all_ffn ? router : 0);
        if (experts_streamable > 0) {
            f.expert_bytes += experts_streamable;
            f.expert_read_share = static_cast<double>(hp.n_expert_used) / hp.n_expert;
        }
        f.streamable_bytes += streamable;
        f.largest_layer_bytes = std::max(f.largest_layer_bytes, streamable);
    }
    const uint64_t head_bytes = static_cast<uint64_t>(slice.n_vocab_rows()) * w.output.row_bytes;
    f.step_bytes = step_bytes + head_bytes;
    if (slice.embeds) f.weight_bytes += static_cast<uint64_t>(w.token_embd.rows) * w.token_embd.row_bytes;
    // A tied head is the embedding matrix: counted once where both live.
    if (slice.n_vocab_rows() > 0 && (w.output.data != w.token_embd.data || !slice.embeds)) {
        f.weight_bytes += head_bytes;
    }
    f.kv_bytes = static_cast<uint64_t>(slice.n_layers()) * static_cast<uint64_t>(n_ctx) *
                 kv_position_bytes(kv_types, slice.n_kv_heads(), hd);
    return f;
}

uint64_t slice_scratch_bytes(const ModelHParams& hp, const Slice& slice, int64_t n_batch, int64_t n_ctx,
                             int64_t n_threads) {
    const char* what = "a slice's working buffers";
    const uint64_t kv_rows = static_cast<uint64_t>(slice.n_kv_heads()) * hp.head_dim;
    const uint64_t q_rows = kv_rows * hp.q_per_kv();
    // Per position: q and attention output, k and v, gate and up, norm, h,
    // partial (f32), the step loop's rows and f64 partials, its vocab rows.
    const uint64_t per_position = 2 * q_rows + 2 * kv_rows + 2 * static_cast<uint64_t>(slice.n_ffn()) +
                                  3 * static_cast<uint64_t>(hp.n_embd) + 3 * static_cast<uint64_t>(hp.n_embd) +
                                  static_cast<uint64_t>(slice.n_vocab_rows());
    const uint64_t batch = checked_mul(checked_mul(per_position, static_cast<uint64_t>(n_batch), what), 4, what);
    // One KV head's history as F32 keys and values, per thread.
    const uint64_t history = checked_mul(checked_mul(static_cast<uint64_t>(n_ctx), 8ull * hp.head_dim, what),
                                         static_cast<uint64_t>(std::max<int64_t>(1, n_threads)), what);
    return checked_add(batch, history, what);
}

}  // namespace tessera

namespace tessera {

uint64_t headroom_margin(uint64_t have) { return (4ull << 20) + have / 64; }

MemoryFit memory_fit(const SliceFootprint& f, uint64_t extra, uint64_t have, bool offload) {
    MemoryFit fit;
    const uint64_t fixed = f.total() - f.streamable_bytes + extra;  // what cannot stream
    fit.floor = fixed + 2 * f.largest_layer_bytes + headroom_margin(have);
    if (f.total() + extra + headroom_margin(have) <= have) {
        fit.fits = true;
        return fit;
    }
    if (!offload || have < fit.floor) return fit;
    fit.fits = true;
    fit.streamed = true;
    const uint64_t usable = have - headroom_margin(have);
    fit.weight_budget = usable - f.kv_bytes - extra;
    const uint64_t overflow = f.total() + extra - usable;
    fit.streamed_bytes = overflow <= f.expert_bytes
                             ? static_cast<uint64_t>(static_cast<double>(overflow) * f.expert_read_share)
                             : std::min(f.streamable_bytes, overflow + 2 * f.largest_layer_bytes);
    return fit;
}

std::string describe_shortfall(const SliceFootprint& f, uint64_t extra, uint64_t have, bool offload,
                               const char* extra_what) {
    std::string text = fmt::format("needs {} bytes ({} of weights, {} of KV cache{}) but has {} available",
                                   f.total() + extra, f.weight_bytes, f.kv_bytes,
                                   extra > 0 ? fmt::format(", {} of {}", extra, extra_what) : std::string(), have);
    const MemoryFit fit = memory_fit(f, extra, have, true);
    if (offload) {
        text += fmt::format(" (streaming its layers from disk, it would still need {})", fit.floor);
    } else if (fit.fits) {
        text += " (--no-offload: it could run streaming its later layers from disk)";
    }
    return text;
}

}  // namespace tessera
