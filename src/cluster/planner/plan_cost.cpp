#include "cluster/planner/plan_cost.h"

#include "cluster/tensor_parallel/partial_exchange.h"

#include "cluster/planner/planner.h"
#include "cluster/planner/speed_probe.h"
#include "cluster/session/messages.h"
#include "net/tcp.h"
#include "util/error.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string_view>

namespace tessera {

namespace {

// Exact partials take about 4.4 bytes a value as packed integers (measured
// on the 8B shape: 17.7 KiB for 4096 values).
constexpr double kExactBytesPerValue = 4.4;

// The machine a node runs on: the root's own for the root and a worker
// at a loopback address (as --local starts), else the address's host.
std::string host_of_node(const std::string& name) {
    if (name == "root") return {};
    try {
        const HostPort at = parse_host_port(name);
        const bool loopback = at.host.starts_with("127.") || at.host == "localhost" || at.host == "::1";
        return loopback ? std::string() : at.host;
    } catch (const Error&) {
        return name;  // a name, not an address: a machine of its own
    }
}

struct Costing {
    const LlamaModel& model;
    std::span<const NodeFacts> nodes;
    bool fast;
    int n_ctx;
    KvCacheTypes kv_types;
    double probe_bytes;
    ReductionUnits units;
    bool offload;
    // The share of a layer's weight bytes in wo and in w_down: the products
    // that end its two syncs, whose bands a reduce-scatter overlaps with
    // the transfer.
    double wo_share, w_down_share;

    double probe(size_t i) const { return nodes[i].probe_seconds > 0 ? nodes[i].probe_seconds : nodes[0].probe_seconds; }

    // The worst round trip and rate among the links of `members` (the
    // root's own link costs nothing).
    LinkCost worst_link(std::span<const size_t> members) const {
        LinkCost worst{0.0, std::numeric_limits<double>::infinity()};
        for (size_t i : members) {
            if (i == 0) continue;
            worst.rtt_seconds = std::max(worst.rtt_seconds, nodes[i].link.rtt_seconds);
            worst.bytes_per_second = std::min(worst.bytes_per_second, std::max(nodes[i].link.bytes_per_second, 1.0));
        }
        return worst;
    }

    double partial_bytes() const {
        const double dim = model.hparams().n_embd;
        const double rows = fast ? (model.hparams().n_embd % 32 == 0 ? dim / 32 * 34 : dim * 2) : dim * kExactBytesPerValue;
        return rows + kStepHeaderBytes;
    }

    // One stage: a group over `layers`, first/last in the pipeline; adds its
    // compute and its own exchanges to `option`, checks its members' memory.
    void add_stage(PlanOption& option, std::span<const size_t> members, std::pair<int, int> layers, bool first,
                   bool last, bool whole_model) const {
        const ModelHParams& hp = model.hparams();
        std::vector<double> probes;
        for (size_t i : members) probes.push_back(probe(i));
        const std::vector<double> weights = weights_from_probes(probes);
        bool all_cpu = true;
        for (size_t i : members) all_cpu = all_cpu && nodes[i].device.empty();
        // As the run's group chooses (tp_decoder.cpp): the balanced split
        // where every host has the memory for its members' shares of it.
        const auto fits = [&](std::span<const Slice> slices) {
            std::vector<HostShare> shares;
            for (size_t k = 0; k < members.size(); ++k) {
                const NodeFacts& node = nodes[members[k]];
                shares.push_back({host_of_node(node.name), slice_footprint(model, slices[k], n_ctx, kv_types).total(),
                                  node.free_memory});
            }
            return shares_fit_hosts(shares);
        };
        const GroupScope scope = whole_model ? GroupScope{} : GroupScope::stage(layers, first, last);
        const MoeSplit split = choose_moe_split_within_memory(hp, weights, units, all_cpu, scope, fits);
        const std::vector<Slice> slices = plan_group(hp, scope, weights, units, split);
        option.moe_splits.push_back(hp.has_experts() && members.size() > 1 ? std::optional(split) : std::nullopt);
        double slowest = 0.0;
        for (size_t k = 0; k < members.size(); ++k) {
            const NodeFacts& node = nodes[members[k]];
            const SliceFootprint f = slice_footprint(model, slices[k], n_ctx, kv_types);
            double seconds = probe(members[k]) * static_cast<double>(f.step_bytes) / probe_bytes;
            const MemoryFit fit = memory_fit(f, 0, node.free_memory, offload);
            if (option.fits && !fit.fits) {
                option.fits = false;
                option.why_not = fmt::format("{} needs {:.1f} MiB (with {:.1f} of margin), has {:.1f} MiB", node.name,
                                             (f.total() + headroom_margin(node.free_memory)) / 1048576.0,
                                             headroom_margin(node.free_memory) / 1048576.0,
                                             node.free_memory / 1048576.0);
            } else if (fit.streamed) {
                // A disk not measured (an older worker) is taken to read 100 MB/s.
                const double rate = node.disk_read_bps > 0 ? node.disk_read_bps : 100e6;
                seconds = std::max(seconds, static_cast<double>(fit.streamed_bytes) / rate);
                option.streaming += fmt::format("{}{} streams {:.0f} MiB/token at {:.0f} MB/s",
                                                option.streaming.empty() ? "" : "; ", node.name,
                                                fit.streamed_bytes / 1048576.0, rate / 1e6);
            }
            slowest = std::max(slowest, seconds);
        }
        option.compute_seconds += slowest;
        const size_t n = members.size();
        if (n < 2) return;
        const LinkCost link = worst_link(members);
        const double others = static_cast<double>(n - 1);
        const double rows = 4.0 * hp.n_embd;
        const double syncs = 2.0 * (layers.second - layers.first);
        // All-to-all: one hop, every partial on every link; reduce-scatter:
        // two hops, 2 (n - 1) / n of a partial on each.
        const double all_to_all =
            kSyncSoftwareSeconds + link.rtt_seconds / 2 + others * partial_bytes() / link.bytes_per_second;
        const double reduce_scatter = 2 * kSyncSoftwareSeconds + link.rtt_seconds +
                                      2 * others / static_cast<double>(n) * partial_bytes() / link.bytes_per_second;
        // The same in bands: a layer's two syncs, each after its last
        // product, computed and sent a segment at a time.
        const double layer_seconds = slowest / std::max(1, layers.second - layers.first);
        const double banded =
            (banded_reduce_scatter_seconds(static_cast<int>(n), layer_seconds * wo_share / static_cast<double>(n),
                                           partial_bytes(), link) +
             banded_reduce_scatter_seconds(static_cast<int>(n), layer_seconds * w_down_share / static_cast<double>(n),
                                           partial_bytes(), link)) /
            2;
        PartialTopology topology = auto_topology(static_cast<int>(n), !fast);
        int bands = 1;
        if (whole_model && !fast) {
            topology = reduce_scatter < all_to_all ? PartialTopology::kReduceScatter : PartialTopology::kAllToAll;
            if (banded < std::min(reduce_scatter, all_to_all)) {
                topology = PartialTopology::kReduceScatter;
                bands = static_cast<int>(n);
            }
        }
        if (whole_model) {
            option.exchange = topology;
            option.partial_bands = bands;
        }
        double network =
            syncs * (bands > 1 ? banded : topology == PartialTopology::kReduceScatter ? reduce_scatter : all_to_all);
        // The residual rows to every worker, once per token.
        network += kSyncSoftwareSeconds + link.rtt_seconds / 2 + others * rows / link.bytes_per_second;
        if (whole_model) {
            // The output-normed rows out, every worker's logits back.
            double logits = 0.0;
            for (size_t k = 1; k < n; ++k) logits += (fast ? 2.0 : 4.0) * slices[k].n_vocab_rows();
            network += kSyncSoftwareSeconds + link.rtt_seconds + (others * rows + logits) / link.bytes_per_second;
        }
        option.network_seconds += network;
    }

    PlanOption cost(PlanKind kind, std::vector<std::vector<size_t>> stages) const {
        const ModelHParams& hp = model.hparams();
        PlanOption option;
        option.kind = kind;
        option.stages = std::move(stages);
        std::vector<double> speeds;
        for (const auto& members : option.stages) {
            double speed = 0.0;
            for (size_t i : members) speed += 1.0 / probe(i);
            speeds.push_back(speed);
        }
        const std::vector<std::pair<int, int>> blocks = plan_layer_blocks(hp.n_layer, speeds);
        for (const auto& b : blocks) option.stage_layers.push_back(b.second - b.first);
        const size_t m = option.stages.size();
        for (size_t s = 0; s < m; ++s) {
            add_stage(option, option.stages[s], blocks[s], s == 0, s + 1 == m, m == 1);
        }
        // The pipeline's hops: rows from stage to stage, logits back.
        for (size_t s = 0; s + 1 < m; ++s) {
            const size_t pair[2] = {option.stages[s][0], option.stages[s + 1][0]};
            const LinkCost link = worst_link(pair);
            option.network_seconds += kSyncSoftwareSeconds + link.rtt_seconds / 2 + 4.0 * hp.n_embd / link.bytes_per_second;
        }
        if (m > 1) {
            const LinkCost link = nodes[option.stages[m - 1][0]].link;
            option.network_seconds += kSyncSoftwareSeconds + link.rtt_seconds / 2 +
                                      4.0 * hp.n_vocab / std::max(link.bytes_per_second, 1.0);
        }
        return option;
    }
};

// The bytes of the model's layer tensors ending in `suffix`
// (".attn_output.weight") over those of all its layer tensors.
double layer_share(const LlamaModel& model, std::string_view suffix) {
    double part = 0.0, all = 0.0;
    for (const GgufTensorInfo& t : model.file().tensors()) {
        if (!t.name.starts_with("blk.")) continue;
        all += static_cast<double>(t.n_bytes);
        if (t.name.ends_with(suffix)) part += static_cast<double>(t.n_bytes);
    }
    return all > 0 ? part / all : 0.0;
}

}  // namespace

double banded_reduce_scatter_seconds(int n, double band_seconds, double partial_bytes, const LinkCost& link) {
    const double x = partial_bytes / (n * std::max(link.bytes_per_second, 1.0));
    const double half = link.rtt_seconds / 2;
    const double shares_in = std::max((n - 1) * band_seconds + x, band_seconds + (n - 1) * x) + half;
    return std::max(0.0, shares_in - n * band_seconds) + (n - 1) * x + half + 2 * kSyncSoftwareSeconds +
           (n - 1) * kBandDispatchSeconds;
}

std::vector<PlanOption> plan_options(const LlamaModel& model, std::span<const NodeFacts> nodes, bool fast, int n_ctx,
                                     KvCacheTypes kv_types, bool offload) {
    if (nodes.empty()) throw make_error("a plan needs the root");
    const Costing c{model,
                    nodes,
                    fast,
                    n_ctx,
                    kv_types,
                    static_cast<double>(probe_bytes(model)),
                    reduction_units(model),
                    offload,
                    layer_share(model, ".attn_output.weight"),
                    layer_share(model, ".ffn_down.weight")};
    std::vector<size_t> workers(nodes.size() - 1);
    std::iota(workers.begin(), workers.end(), size_t{1});
    std::stable_sort(workers.begin(), workers.end(), [&](size_t a, size_t b) {
        return nodes[a].link.rtt_seconds < nodes[b].link.rtt_seconds;
    });
    const int n_layer = model.hparams().n_layer;
    std::vector<PlanOption> options;
    options.push_back(c.cost(PlanKind::Single, {{0}}));
    for (size_t k = 1; k <= workers.size(); ++k) {
        std::vector<size_t> group = {0};
        group.insert(group.end(), workers.begin(), workers.begin() + static_cast<std::ptrdiff_t>(k));
        options.push_back(c.cost(PlanKind::TensorParallel, {group}));
        if (static_cast<int>(k) + 1 <= n_layer) {
            std::vector<std::vector<size_t>> stages;
            for (size_t i : group) stages.push_back({i});
            options.push_back(c.cost(PlanKind::Pipeline, stages));
        }
        // The best-linked workers join the root's group; the rest follow as
        // stages of their own.
        for (size_t g = 1; g < k && static_cast<int>(k - g) + 1 <= n_layer; ++g) {
            std::vector<std::vector<size_t>> stages = {{group.begin(), group.begin() + static_cast<std::ptrdiff_t>(g + 1)}};
            for (size_t i = g + 1; i <= k; ++i) stages.push_back({group[i]});
            options.push_back(c.cost(PlanKind::Hybrid, stages));
        }
    }
    return options;
}

const PlanOption& best_option(std::span<const PlanOption> options) {
    const PlanOption* best = nullptr;
    for (const PlanOption& o : options) {
        if (o.fits && (best == nullptr || o.seconds() < best->seconds())) best = &o;
    }
    if (best == nullptr) {
        std::string why;
        for (const PlanOption& o : options) why += "; " + o.why_not;
        throw PlanRefused("plan refused: no plan of these nodes fits their memory" + why);
    }
    return *best;
}

std::string describe_option(const PlanOption& option, std::span<const NodeFacts> nodes) {
    if (option.kind == PlanKind::Single) return "one node";
    static constexpr const char* kKinds[] = {"one node", "tensor parallel", "pipeline", "hybrid"};
    std::string out = std::string(kKinds[static_cast<int>(option.kind)]) + ":";
    for (size_t s = 0; s < option.stages.size(); ++s) {
        out += s == 0 ? " " : " / ";
        for (size_t k = 0; k < option.stages[s].size(); ++k) {
            out += (k ? "," : "") + nodes[option.stages[s][k]].name;
        }
    }
    for (size_t s = 0; s < option.moe_splits.size(); ++s) {
        if (!option.moe_splits[s]) continue;
        out += option.stages.size() == 1 ? fmt::format(" (experts split by {})", moe_split_name(*option.moe_splits[s]))
                                         : fmt::format(" (stage {}: experts split by {})", s,
                                                       moe_split_name(*option.moe_splits[s]));
    }
    return out;
}

}  // namespace tessera
