// tessera plan: print the plan a run would use, per node (layers, KV heads,
// FFN channels, bytes of weights and KV cache), without running it. The same
// planner functions as a run; shares follow --weights / --stage-layers or the
// cluster file, and are equal where those are silent (a run measures speed).
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "cluster/planner/planner.h"
#include "cluster/sequence_parallel/sp_chunks.h"
#include "model/kv_codebooks.h"
#include "cluster/planner/auto_plan.h"
#include "cluster/planner/worker_discovery.h"
#include "model/llama_model.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "net/tcp.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

namespace tessera {

namespace {

struct PlanOptions {
    std::string model;
    int n_ctx = 0;
    AttentionFlags attention;
    ParallelOptions parallel;
    bool json = false;
    int n_threads = 0;
    int prompt_tokens = 0;  // --prefill sp: the prompt to cut (0: the context)
    std::string draft_model;  // speculative decoding: a draft model the root holds beside its share
    int n_batch = 512;
};

struct PlannedNode {
    size_t stage = 0;
    std::string address;
    Slice slice;
    SliceFootprint footprint;
};

// --prefill sp: each node's chunk of a prompt and the bytes it sends and
// receives (cluster/sequence_parallel/sp_chunks.h), every node holding the whole model.
void plan_sequence_parallel(const PlanOptions& o, const LlamaModel& model, int n_ctx, KvCacheTypes kv_types) {
    const ModelHParams& hp = model.hparams();
    std::vector<std::string> names = {"root"};
    for (const HostPort& w : parse_host_port_list(o.parallel.workers)) names.push_back(w.str());
    for (int i = 1; i < o.parallel.local; ++i) names.push_back(fmt::format("local worker {}", i));
    if (names.size() < 2) throw make_error("--prefill sp needs --local N or --workers");
    std::vector<double> weights = o.parallel.weights;
    if (weights.empty()) weights.assign(names.size(), 1.0);
    if (weights.size() != names.size()) throw make_error("{} weights given for {} nodes", weights.size(), names.size());
    const int prompt = o.prompt_tokens > 0 ? o.prompt_tokens : n_ctx;
    const int n_batch = std::min(o.n_batch, prompt);
    const uint64_t exact_bytes = kv_position_bytes(kv_types, hp.n_head_kv, hp.head_dim);
    uint64_t position_bits = 8 * exact_bytes;
    std::string exchange = fmt::format("exact K/V rows, {} bytes a position and layer", exact_bytes);
    if (!o.parallel.codebooks.empty()) {
        const KvCodebooks books = KvCodebooks::load(o.parallel.codebooks);
        books.require_model(model.file().fingerprint_hex(), hp.n_layer, hp.n_head_kv * hp.head_dim);
        exchange = fmt::format("codebook indices, {} bits a position and layer ({} groups, {} codes)",
                               books.bits_per_position(), books.groups(), books.codes());
        position_bits = static_cast<uint64_t>(books.bits_per_position());
    }
    const std::vector<double> costs =
        prefill_batch_costs(0, prompt, n_batch, prefill_cost_model(hp, resolve_sparse(o.attention)));
    const std::vector<PromptChunk> chunks = plan_prompt_chunks(0, prompt, n_batch, weights, costs);
    const std::vector<ChunkTraffic> traffic = prompt_chunk_traffic(chunks, 0, hp.n_layer, position_bits, n_batch);
    const SliceFootprint f = slice_footprint(model, full_slice(hp), n_ctx, kv_types);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (size_t i = 0; i < names.size(); ++i) {
            j.push_back({{"node", names[i]}, {"weight", weights[i]}, {"pos0", chunks[i].pos0},
                         {"tokens", chunks[i].n_tok}, {"bytes_sent", traffic[i].sent},
                         {"bytes_received", traffic[i].received}, {"weight_bytes", f.weight_bytes},
                         {"kv_bytes", f.kv_bytes}});
        }
        std::printf("%s\n", nlohmann::json({{"model", model.path()}, {"prefill", "sp"}, {"prompt_tokens", prompt},
                                             {"exchange", exchange}, {"nodes", j}})
                                 .dump(2)
                                 .c_str());
        return;
    }
    std::printf("model %s: %d layers; sequence-parallel prefill of %d tokens in batches of %d, every node holding the "
                "whole model; %s\n", model.path().c_str(), hp.n_layer, prompt, n_batch, exchange.c_str());
    std::printf("%-22s %-7s %-13s %8s %12s %12s %12s\n", "node", "weight", "positions", "tokens", "sends MiB",
                "receives MiB", "total MiB");
    for (size_t i = 0; i < names.size(); ++i) {
        std::printf("%-22s %-7.2f %-13s %8d %12.2f %12.2f %12.1f%s\n", names[i].c_str(), weights[i],
                    fmt::format("{}..{}", chunks[i].pos0, chunks[i].pos0 + chunks[i].n_tok).c_str(), chunks[i].n_tok,
                    traffic[i].sent / 1048576.0, traffic[i].received / 1048576.0, f.total() / 1048576.0,
                    i == 0 ? "  (relays, generates)" : "");
    }
}


// A tensor-parallel group's FFN channels and KV heads move in whole units
// (model/reduction_units.h: ffn_down's and wo's blocks, e.g. 256 columns of
// a K-quant). Says so, with the shares, where the units are coarser than a
// 32-channel block and the shares came out uneven.
// A slice's further parts (the mixed and balanced splits): [{experts, ffn}, ...],
// a dealt part with its "turn": [index, count].
nlohmann::json tails_json(const Slice& s) {
    nlohmann::json tails = nlohmann::json::array();
    for (const ExpertPart& t : s.tails) {
        nlohmann::json part = {{"experts", {t.expert_begin, t.expert_end}}, {"ffn", {t.ffn_begin, t.ffn_end}}};
        if (t.dealt()) part["turn"] = {t.deal_index, t.deal_count};
        tails.push_back(part);
    }
    return tails;
}

// The plan table's FFN column: channels, whole experts (E0-63), the mixed
// split's channels of each half (E0-63:0-511+E64-127:0-255), or the balanced
// split's own and shared channels, the shared ones with the rank's turn
// (E0-127:0-255+E0-127:512-767@0/2).
std::string ffn_column(const ModelHParams& hp, const Slice& s) {
    if (s.n_ffn() == 0) return "-";
    if (!hp.has_experts() || (s.n_experts() == hp.n_expert && !s.has_tail())) {
        return fmt::format("{}-{}", s.ffn_begin, s.ffn_end - 1);
    }
    if (s.n_ffn() == hp.n_ff && !s.has_tail()) return fmt::format("E{}-{}", s.expert_begin, s.expert_end - 1);
    std::string text;
    for (const ExpertPart& p : expert_parts(s)) {
        text += fmt::format("{}E{}-{}:{}-{}", text.empty() ? "" : "+", p.expert_begin, p.expert_end - 1, p.ffn_begin,
                            p.ffn_end - 1);
        if (p.dealt()) text += fmt::format("@{}/{}", p.deal_index, p.deal_count);
    }
    return text;
}

void print_unit_rounding(const LlamaModel& model, const ReductionUnits& units, const std::vector<PlannedNode>& nodes) {
    const ModelHParams& hp = model.hparams();
    std::map<size_t, std::vector<const PlannedNode*>> stages;
    for (const PlannedNode& n : nodes) stages[n.stage].push_back(&n);
    for (const auto& [stage, members] : stages) {
        if (members.size() < 2 || units.ffn_channels <= 32) continue;
        // Whole experts (the expert split) move one by one, every channel;
        // the mixed split shows its halves in the table.
        if (hp.has_experts() && (members[0]->slice.n_experts() < hp.n_expert || members[0]->slice.has_tail())) continue;
        std::string shares;
        int smallest = hp.n_ff, largest = 0;
        for (const PlannedNode* n : members) {
            const int share = n->slice.ffn_end - n->slice.ffn_begin;
            shares += (shares.empty() ? "" : ", ") + std::to_string(share);
            smallest = std::min(smallest, share);
            largest = std::max(largest, share);
        }
        const GgufTensorInfo* down = model.file().find_tensor(
            fmt::format("blk.{}.{}.weight", members[0]->slice.layer_begin, hp.has_experts() ? "ffn_down_exps" : "ffn_down"));
        std::printf("stage %zu: FFN channels move in units of %d (ffn_down is %s), KV heads in units of %d; FFN shares %s%s\n",
                    stage, units.ffn_channels, down != nullptr ? quant_type_name(down->type) : "?", units.kv_heads,
                    shares.c_str(), largest - smallest >= units.ffn_channels ? " (rounded to whole units)" : "");
    }
}

void plan(const PlanOptions& given) {
    PlanOptions o = given;
    o.parallel = with_discovered_workers(given.parallel,
                                         [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    const LlamaModel model(o.model.empty() ? default_model_path() : o.model);
    const ModelHParams& hp = model.hparams();
    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(hp.n_ctx_train, 4096);
    const KvCacheTypes kv_types = resolve_cache_types(o.attention);
    if (o.parallel.sequence_parallel()) {
        plan_sequence_parallel(o, model, n_ctx, kv_types);
        return;
    }
    if (o.parallel.auto_plan) {
        ForwardConfig config;
        config.n_ctx = n_ctx;
        config.kv_types = kv_types;
        const PlanSurvey survey =
            survey_plans(model, config, o.n_threads > 0 ? o.n_threads : default_threads(o.parallel), o.parallel);
        if (o.json) {
            nlohmann::json options = nlohmann::json::array();
            for (size_t i = 0; i < survey.options.size(); ++i) {
                const PlanOption& p = survey.options[i];
                options.push_back({{"plan", describe_option(p, survey.nodes)},
                                   {"tokens_per_second", 1.0 / p.seconds()},
                                   {"compute_ms", p.compute_seconds * 1e3},
                                   {"network_ms", p.network_seconds * 1e3},
                                   {"stage_layers", p.stage_layers},
                                   {"exchange", p.kind == PlanKind::TensorParallel ? partial_topology_name(p.exchange) : ""},
                                   {"partial_bands", p.kind == PlanKind::TensorParallel ? p.partial_bands : 1},
                                   {"fits", p.fits},
                                   {"streaming", p.streaming},
                                   {"chosen", i == survey.chosen}});
            }
            nlohmann::json nodes = nlohmann::json::array();
            for (const NodeFacts& n : survey.nodes) {
                nodes.push_back({{"node", n.name},
                                 {"probe_seconds", n.probe_seconds},
                                 {"free_memory", n.free_memory},
                                 {"cpu_target", n.cpu_target},
                                 {"device", n.device.empty() ? "cpu" : n.device},
                                 {"disk_read_bps", n.disk_read_bps},
                                 {"rtt_ms", n.link.rtt_seconds * 1e3},
                                 {"mbit_per_second", n.link.bytes_per_second * 8e-6}});
            }
            std::printf("%s\n", nlohmann::json({{"model", model.path()}, {"nodes", nodes}, {"options", options}}).dump(2).c_str());
        } else {
            std::printf("%s", format_survey(survey).c_str());
        }
        return;
    }

    // Tensor parallel alone is a plan of one stage.
    ClusterSpec spec;
    if (std::optional<ClusterSpec> given = cluster_spec_of(o.parallel)) {
        spec = *given;
    } else {
        ClusterStage stage;
        std::string list = o.parallel.workers;
        for (int i = 1; i < o.parallel.local; ++i) list += (list.empty() ? "" : ",") + fmt::format("127.0.0.1:{}", i);
        if (!list.empty()) stage.nodes = parse_stages_option("root," + list).stages[0].nodes;
        stage.weights = o.parallel.weights;
        if (!stage.weights.empty() && stage.weights.size() != stage.nodes.size() + 1) {
            throw make_error("{} weights given for {} ranks", stage.weights.size(), stage.nodes.size() + 1);
        }
        spec.stages.push_back(stage);
    }
    std::vector<double> stage_weights;
    std::vector<int> stage_layers;
    for (const ClusterStage& s : spec.stages) {
        const size_t members = s.nodes.size() + (&s == &spec.stages[0] ? 1 : 0);
        stage_weights.push_back(s.weight > 0 ? s.weight : static_cast<double>(members));
        if (s.layers > 0) stage_layers.push_back(s.layers);
    }
    const std::vector<std::pair<int, int>> blocks = plan_layer_blocks(hp.n_layer, stage_weights, stage_layers);
    const ReductionUnits units = reduction_units(model);
    const uint64_t here = available_memory_bytes();
    std::vector<PlannedNode> nodes;
    for (size_t s = 0; s < spec.stages.size(); ++s) {
        const ClusterStage& stage = spec.stages[s];
        std::vector<std::string> names;
        if (s == 0) names.push_back("root");
        for (size_t k = 0; k < stage.nodes.size(); ++k) {
            // --local workers get their ports when they start.
            names.push_back(o.parallel.local > 1 ? fmt::format("local worker {}", k + 1) : stage.nodes[k].str());
        }
        std::vector<double> weights = stage.weights;
        if (weights.empty()) weights.assign(names.size(), 1.0);
        // As a run plans it: one group alone splits the output head's rows too.
        // As a run chooses (tp_decoder.cpp): the balanced split where the
        // memory of every node holds its share of it. Only this machine's is
        // known here: the processes of --local share it; workers elsewhere
        // report theirs to a run.
        const bool one_host = spec.stages.size() == 1 && o.parallel.local > 1;
        uint64_t balanced_need = 0;  // the largest share of the balanced split (0: not planned)
        const auto fits_here = [&](std::span<const Slice> slices) {
            std::vector<HostShare> shares;
            for (const Slice& slice : slices) {
                shares.push_back({"", slice_footprint(model, slice, n_ctx, kv_types).total(), here});
                balanced_need = std::max(balanced_need, shares.back().need);
            }
            return one_host && shares_fit_hosts(shares);
        };
        const GroupScope scope = spec.stages.size() == 1
                                     ? GroupScope{}
                                     : GroupScope::stage(blocks[s], s == 0, s + 1 == spec.stages.size());
        const MoeSplit split = parse_moe_split(o.parallel.moe_split)
                                   .value_or(choose_moe_split_within_memory(hp, weights, units, true, scope, fits_here));
        if (hp.has_experts() && names.size() > 1 && !o.json) {
            // The busiest rank's expected expert products per token, in whole
            // experts on a rank of weight 1 (planner.h), each way.
            // The balanced split, where these ranks can take it (each needs units of its own).
            std::string balanced = "no";
            try {
                balanced = fmt::format("{:.2f}", expected_expert_load(hp, weights, units, MoeSplit::kBalanced));
            } catch (const Error&) {
            }
            std::printf("stage %zu: experts split by %s (expected load of the busiest rank: %.2f by channels, %.2f by "
                        "experts, %.2f mixed, %s balanced; %d of %d experts per token)\n",
                        s, moe_split_name(split), expected_expert_load(hp, weights, units, MoeSplit::kChannels),
                        expected_expert_load(hp, weights, units, MoeSplit::kExperts),
                        expected_expert_load(hp, weights, units, MoeSplit::kMixed), balanced.c_str(), hp.n_expert_used,
                        hp.n_expert);
            if (!one_host && split != MoeSplit::kBalanced && balanced_need > 0 && !parse_moe_split(o.parallel.moe_split)) {
                std::printf("stage %zu: a run takes the balanced split where every node has the memory for its share of "
                            "it (up to %.1f MiB)\n",
                            s, balanced_need / 1048576.0);
            }
        }
        const std::vector<Slice> slices = plan_group(hp, scope, weights, units, split);
        for (size_t n = 0; n < names.size(); ++n) {
            nodes.push_back({s, names[n], slices[n], slice_footprint(model, slices[n], n_ctx, kv_types)});
        }
    }
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const PlannedNode& n : nodes) {
            j.push_back({{"stage", n.stage},
                         {"node", n.address},
                         {"layers", {n.slice.layer_begin, n.slice.layer_end}},
                         {"kv_heads", {n.slice.kv_head_begin, n.slice.kv_head_end}},
                         {"ffn", {n.slice.ffn_begin, n.slice.ffn_end}},
                         {"experts", {n.slice.expert_begin, n.slice.expert_end}},
                         {"tails", tails_json(n.slice)},
                         {"vocab", {n.slice.vocab_begin, n.slice.vocab_end}},
                         {"embeds", n.slice.embeds},
                         {"outputs", n.slice.outputs},
                         {"weight_bytes", n.footprint.weight_bytes},
                         {"kv_bytes", n.footprint.kv_bytes}});
        }
        std::printf("%s\n", nlohmann::json({{"model", model.path()}, {"n_ctx", n_ctx}, {"nodes", j}}).dump(2).c_str());
    } else {
        std::printf("model %s: %d layers, %d KV heads, FFN %d, context %d (KV cache: K %s, V %s)\n",
                    model.path().c_str(), hp.n_layer, hp.n_head_kv, hp.n_ff, n_ctx, quant_type_name(kv_types.k),
                    quant_type_name(kv_types.v));
        std::printf("%-6s %-22s %-8s %-9s %-11s %-13s %12s %12s %12s\n", "stage", "node", "layers", "kv heads", "ffn",
                    "vocab", "weights MiB", "KV MiB", "total MiB");
        for (const PlannedNode& n : nodes) {
            std::printf("%-6zu %-22s %-8s %-9s %-11s %-13s %12.1f %12.1f %12.1f%s\n", n.stage, n.address.c_str(),
                        fmt::format("{}-{}", n.slice.layer_begin, n.slice.layer_end - 1).c_str(),
                        n.slice.n_kv_heads() > 0
                            ? fmt::format("{}-{}", n.slice.kv_head_begin, n.slice.kv_head_end - 1).c_str()
                            : "-",
                        ffn_column(hp, n.slice).c_str(),
                        n.slice.n_vocab_rows() > 0
                            ? fmt::format("{}-{}", n.slice.vocab_begin, n.slice.vocab_end - 1).c_str()
                            : "-",
                        n.footprint.weight_bytes / 1048576.0, n.footprint.kv_bytes / 1048576.0,
                        n.footprint.total() / 1048576.0,
                        n.slice.embeds && n.slice.outputs ? "  (embeds, logits)"
                        : n.slice.embeds                  ? "  (embeds)"
                        : n.slice.outputs                 ? "  (logits)"
                                                          : "");
        }
    }
    if (!o.json) print_unit_rounding(model, units, nodes);
    // Only this machine's memory is known without contacting the nodes; a run
    // checks every node's.
    const bool offload = !o.parallel.no_offload;
    // A draft model lives on the root beside its share (whole, with its own
    // KV cache of the same context).
    uint64_t draft_bytes = 0;
    if (!o.draft_model.empty()) {
        const LlamaModel draft(o.draft_model);
        const SliceFootprint d = slice_footprint(draft, full_slice(draft.hparams()), n_ctx, kv_types);
        draft_bytes = d.total();
        if (!o.json) {
            std::printf("draft %s on the root: %.1f MiB (%.1f of weights, %.1f of KV cache); the root holds %.1f MiB in "
                        "all\n",
                        draft.path().c_str(), d.total() / 1048576.0, d.weight_bytes / 1048576.0, d.kv_bytes / 1048576.0,
                        (d.total() + nodes[0].footprint.total()) / 1048576.0);
        }
    }
    const MemoryFit fit = memory_fit(nodes[0].footprint, draft_bytes, here, offload);
    if (!fit.fits) {
        throw make_error("plan refused: the root {}", describe_shortfall(nodes[0].footprint, draft_bytes, here, offload, "the draft model"));
    }
    if (fit.streamed && !o.json) {
        std::printf("the root's memory (%.1f MiB available) holds part of its share: it streams ~%.1f MiB of its layers "
                    "from disk per token (--no-offload refuses instead)\n",
                    here / 1048576.0, fit.streamed_bytes / 1048576.0);
    }
}

}  // namespace

void add_plan_command(CLI::App& app) {
    auto o = std::make_shared<PlanOptions>();
    CLI::App* cmd = app.add_subcommand("plan", "Print the plan a run would use (per node: layers, heads, channels, "
                                               "bytes of weights and KV cache) without running it");
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled models/stories260K.gguf)");
    cmd->add_option("-c,--ctx-size", o->n_ctx, "Context size in tokens (0: the model's, at most 4096)")
        ->capture_default_str();
    add_attention_flags(cmd, o->attention);
    cmd->add_flag("--json", o->json, "Print the plan as JSON");
    cmd->add_option("-t,--threads", o->n_threads, "--auto: the root's threads for its speed probe, as a run would use (0: one per CPU)")
        ->capture_default_str();
    add_parallel_flags(cmd, o->parallel);
    cmd->add_option("--prompt-tokens", o->prompt_tokens, "--prefill sp: the prompt length to cut (0: the context)")
        ->capture_default_str();
    cmd->add_option("-b,--batch-size", o->n_batch, "--prefill sp: the batch (chunks are whole batches)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--draft-model", o->draft_model,
                    "Speculative decoding: a draft model the root holds beside its share (counted in its memory)");
    cmd->callback([o] { plan(*o); });
}

}  // namespace tessera
