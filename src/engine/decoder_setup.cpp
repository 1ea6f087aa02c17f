#include "engine/decoder_setup.h"

#include "cluster/planner/planner.h"
#include "cluster/planner/auto_plan.h"
#include "cluster/planner/worker_discovery.h"
#include "model/local_decoder.h"
#include "net/wire_key.h"
#include "util/system_memory.h"
#include "util/error.h"

#include <algorithm>
#include <cstdint>
#include <thread>

#if TESSERA_VULKAN
#include "gpu_model/vulkan_decoder.h"
#endif

namespace tessera {

namespace {
// "vulkan:0 (NAME)" for --device vulkan[:N] (empty for the CPU).
std::string device_name(const ParallelOptions& options) {
    const std::optional<int> vulkan = vulkan_device_of(options.device);
    if (!vulkan) return "";
#if TESSERA_VULKAN
    for (const VulkanDeviceInfo& d : vulkan_devices()) {
        if (d.index == *vulkan) return fmt::format("vulkan:{} ({})", d.index, d.name);
    }
#endif
    return fmt::format("vulkan:{}", *vulkan);
}
}  // namespace

std::optional<int> vulkan_device_of(const std::string& device) {
    if (device.empty() || device == "cpu") return std::nullopt;
    if (device.rfind("vulkan", 0) != 0 || (device.size() > 6 && device[6] != ':')) {
        throw make_error("--device {}: the devices are cpu and vulkan[:N] (see tessera devices)", device);
    }
#if !TESSERA_VULKAN
    throw make_error("--device {}: this binary was built without the Vulkan backend (it needs libvulkan-dev and glslc "
                     "at build time)", device);
#endif
    if (device.size() == 6) return 0;
    const std::string index = device.substr(7);
    if (index.empty() || index.size() > 4 || index.find_first_not_of("0123456789") != std::string::npos) {
        throw make_error("--device {}: N in vulkan:N is a device number (see tessera devices)", device);
    }
    return std::stoi(index);
}

int default_threads(const ParallelOptions& options) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::max(1, cores / std::max(1, options.local));
}

std::optional<ClusterSpec> cluster_spec_of(const ParallelOptions& options) {
    if (!options.pipeline()) {
        if (!options.stage_layers.empty() && options.generate != "pipeline") {
            throw make_error("--stage-layers needs --stages, --cluster or --generate pipeline");
        }
        return std::nullopt;
    }
    if (!options.stages.empty() && !options.cluster.empty()) throw make_error("use either --stages or --cluster");
    if (!options.workers.empty() || options.local > 1) {
        throw make_error("--stages and --cluster name every node: leave out --workers and --local");
    }
    ClusterSpec spec = options.cluster.empty() ? parse_stages_option(options.stages) : load_cluster_file(options.cluster);
    if (!options.weights.empty()) {
        if (options.weights.size() != spec.stages.size()) {
            throw make_error("{} weights given for {} stages", options.weights.size(), spec.stages.size());
        }
        for (size_t s = 0; s < spec.stages.size(); ++s) spec.stages[s].weight = options.weights[s];
    }
    if (!options.stage_layers.empty()) {
        if (options.stage_layers.size() != spec.stages.size()) {
            throw make_error("{} layer counts given for {} stages", options.stage_layers.size(), spec.stages.size());
        }
        for (size_t s = 0; s < spec.stages.size(); ++s) spec.stages[s].layers = options.stage_layers[s];
    }
    return spec;
}

namespace {

DecoderSetup make_pipeline(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                           const ParallelOptions& options, const ClusterSpec& spec) {
    if (options.fast) throw make_error("--fast is for tensor parallel (--workers, --local); pipelines are exact");
    PipelineConfig pc;
    for (size_t s = 0; s < spec.stages.size(); ++s) {
        const ClusterStage& stage = spec.stages[s];
        // Stage 0's leader is the root; later stages' leaders are their first node.
        const size_t members_from = s == 0 ? 0 : 1;
        if (s > 0) pc.stages.push_back(stage.nodes[0]);
        pc.groups.emplace_back(stage.nodes.begin() + static_cast<std::ptrdiff_t>(members_from), stage.nodes.end());
        pc.group_weights.push_back(stage.weights);
        if (stage.weight > 0) pc.weights.push_back(stage.weight);
        if (stage.layers > 0) pc.layers.push_back(stage.layers);
    }
    pc.forward = config;
    pc.n_threads = n_threads;
    pc.limits.io_timeout_ms = options.timeout_ms;
    pc.connect_timeout_ms = options.timeout_ms;
    pc.key = key_from_flag_or_env(options.key_file);
    pc.step_timeout_ms = options.step_timeout_ms;
    // Every group's split of a mixture of experts (none: each group's leader chooses).
    pc.moe_split = parse_moe_split(options.moe_split);
    // The root's own stage on its GPU (--device vulkan[:N], --gpu-layers).
    if (const std::optional<int> vulkan = vulkan_device_of(options.device)) {
#if TESSERA_VULKAN
        const int index = *vulkan, gpu_layers = options.gpu_layers;
        pc.root_device_name = device_name(options);
        pc.root_device = [=](const LlamaModel& m, const Slice& slice, const ForwardConfig& c) {
            return std::unique_ptr<SliceRunner>(std::make_unique<SplitLayers>(m, slice, c, index, gpu_layers, n_threads));
        };
        // A hybrid plan's root stage leads a tensor-parallel group: the
        // root's rank of it on the GPU, as a worker's rank is (no split of
        // its layers with the CPU: its partials meet the group's every layer).
        pc.root_rank_device = [=](const LlamaModel& m, const Slice& slice, const ForwardConfig& c) {
            return make_vulkan_rank(m, slice, c, index, gpu_layers);
        };
#endif
    }
    DecoderSetup setup;
    setup.device = device_name(options);
    auto decoder = std::make_unique<PipelineDecoder>(model, pc);
    setup.pipeline = decoder.get();
    setup.decoder = std::move(decoder);
    return setup;
}

}  // namespace

DecoderSetup make_decoder(const LlamaModel& model, const ForwardConfig& given, int n_threads,
                          const ParallelOptions& options) {
    if (options.discover) {
        const ParallelOptions found = with_discovered_workers(
            options, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
        return make_decoder(model, given, n_threads, found);
    }
    if (options.auto_plan) {
        const PlanSurvey survey = survey_plans(model, given, n_threads, options);
        DecoderSetup setup = make_decoder(model, given, n_threads, chosen_plan_options(survey, options));
        setup.plan_report = format_survey(survey);
        return setup;
    }
    ForwardConfig config = given;
    config.private_weights = !options.mmap;
    config.offload = !options.no_offload;
    if (options.fast && options.exact) throw make_error("--fast and --exact exclude each other");
    if (!options.codebooks.empty() && !options.sequence_parallel()) {
        throw make_error("--codebooks compresses the rows of sequence-parallel prefill: it needs --prefill sp");
    }
    if (options.generate != "root" &&
        ((options.generate != "tp" && options.generate != "pipeline") || !options.sequence_parallel())) {
        throw make_error("--generate {}: after --prefill sp, generation goes on on the 'root', a 'tp' group or a "
                         "'pipeline' of the same nodes", options.generate);
    }
    if (options.prefill != "plan" && options.prefill != "sp") {
        throw make_error("--prefill {} is not a prefill mode (plan or sp)", options.prefill);
    }
    if (const std::optional<ClusterSpec> spec = cluster_spec_of(options)) {
        if (options.sequence_parallel()) {
            throw make_error("--prefill sp runs over --local or --workers (each holding the whole model) and goes on "
                             "generating on the root or a tensor-parallel group of them (--generate tp); it does not "
                             "hand the prompt to a pipeline");
        }
        return make_pipeline(model, config, n_threads, options, *spec);
    }
    if (options.local < 1) throw make_error("--local needs at least 1 process, got {}", options.local);
    const std::optional<int> vulkan = vulkan_device_of(options.device);
    if (vulkan && options.sequence_parallel()) {
        throw make_error("--device {}: sequence-parallel prefill (--prefill sp) runs on CPUs for now", options.device);
    }
    DecoderSetup setup;
    setup.device = device_name(options);
    std::vector<HostPort> workers = parse_host_port_list(options.workers);
    std::shared_ptr<const WireKey> key = key_from_flag_or_env(options.key_file);
    if (options.local > 1) {
        if (!workers.empty()) throw make_error("use either --workers or --local, not both");
        // The processes of --local share a fresh key that never touches disk
        // (passed through a pipe), so their frames are sealed like any others.
        if (!key) key = std::make_shared<const WireKey>(random_key());
        std::vector<std::string> extra;
        if (options.sequence_parallel() && !options.codebooks.empty()) extra = {"--codebooks", options.codebooks};
        setup.local_workers =
            std::make_unique<LocalWorkers>(self_executable(), model.path(), options.local - 1, n_threads, 30000,
                                           options.mmap, key.get(), extra);
        workers = setup.local_workers->addresses();
    }
    if (workers.empty()) {
        if (!options.weights.empty()) throw make_error("--weights needs --workers or --local");
        // The plan of one node is refused like any other that does not fit.
        // Every sequence (serve --parallel) has a cache of n_ctx positions.
        const int64_t positions = static_cast<int64_t>(config.n_ctx) * std::max(1, config.n_seq);
        const SliceFootprint need = slice_footprint(model, full_slice(model.hparams()),
                                                    static_cast<int>(std::min<int64_t>(positions, INT32_MAX)), config.kv_types);
        const uint64_t have = available_memory_bytes();
        const uint64_t scratch = slice_scratch_bytes(model.hparams(), full_slice(model.hparams()), config.n_batch,
                                                     config.n_ctx, n_threads);
        const MemoryFit fit = memory_fit(need, scratch, have, config.offload && config.private_weights);
        if (!fit.fits) {
            throw PlanRefused(fmt::format("plan refused: this process {}; split the model with --stages (pipeline) or "
                                          "--workers (tensor parallel), or use a smaller context (-c)",
                                          describe_shortfall(need, scratch, have, config.offload && config.private_weights)));
        }
        config.weight_budget = fit.weight_budget;
        if (vulkan) {
#if TESSERA_VULKAN
            auto gpu = std::make_unique<VulkanDecoder>(model, config, *vulkan, options.gpu_layers, n_threads);
            setup.decoder = std::move(gpu);
            return setup;
#endif
        }
        auto local = std::make_unique<LocalDecoder>(model, config, n_threads);
        setup.streamed_bytes = local->forward().streamed_bytes_per_token();
        setup.local = &local->forward();
        setup.decoder = std::move(local);
        return setup;
    }
    if (options.sequence_parallel()) {
        if (options.fast) throw make_error("--prefill sp is exact: its K/V rows travel as the caches hold them (no --fast)");
        SpPrefillConfig sp;
        sp.workers = workers;
        sp.weights = options.weights;
        sp.forward = config;
        sp.n_threads = n_threads;
        sp.limits.io_timeout_ms = options.timeout_ms;
        sp.connect_timeout_ms = options.timeout_ms;
        sp.key = key;
        if (options.step_timeout_ms > 0) sp.step_timeout_ms = options.step_timeout_ms;
        if (!options.codebooks.empty()) sp.codebooks = std::make_shared<const KvCodebooks>(KvCodebooks::load(options.codebooks));
        if (options.generate == "tp") {
            // The group the nodes become after the prompt: exact partials,
            // over the links prefill used (TCP).
            TpConfig group;
            group.step_timeout_ms = options.step_timeout_ms;
            group.partial_bands = options.partial_bands;
            if (options.exchange != "auto") group.topology = parse_partial_topology(options.exchange);
            group.moe_split = parse_moe_split(options.moe_split);
            group.shared_memory = false;
            // As for a plain group: local processes get equal shares.
            if (options.weights.empty() && setup.local_workers) group.weights.assign(static_cast<size_t>(options.local), 1.0);
            sp.group = group;
        } else if (options.generate == "pipeline") {
            // Stages in node order, over the links prefill used.
            PipelineConfig pipeline;
            pipeline.step_timeout_ms = options.step_timeout_ms;
            pipeline.layers = options.stage_layers;
            if (options.weights.empty() && options.stage_layers.empty() && setup.local_workers) {
                pipeline.weights.assign(static_cast<size_t>(options.local), 1.0);
            }
            sp.pipeline = pipeline;
        }
        auto decoder = std::make_unique<SpPrefillDecoder>(model, sp);
        setup.sequence_parallel = decoder.get();
        setup.decoder = std::move(decoder);
        return setup;
    }
    TpConfig tp;
    tp.workers = workers;
    tp.weights = options.weights;
    // Local ranks are copies of one process on one machine, with the same
    // threads: equal shares. A speed probe would only measure this
    // machine's noise (on a busy VM it once planned 1.5 : 1 for two equal
    // processes, and the larger share set every token's pace).
    if (tp.weights.empty() && setup.local_workers) tp.weights.assign(static_cast<size_t>(options.local), 1.0);
    tp.fast = options.fast;
    tp.forward = config;
    tp.n_threads = n_threads;
    tp.limits.io_timeout_ms = options.timeout_ms;
    tp.connect_timeout_ms = options.timeout_ms;
    tp.shared_memory = !options.tcp_only;
    tp.key = key;
    tp.step_timeout_ms = options.step_timeout_ms;
    tp.partial_bands = options.partial_bands;
    if (options.exchange != "auto") tp.topology = parse_partial_topology(options.exchange);
    tp.moe_split = parse_moe_split(options.moe_split);
    // The root's own rank on its GPU (--device vulkan[:N]).
    if (vulkan) {
#if TESSERA_VULKAN
        const int index = *vulkan, gpu_layers = options.gpu_layers;
        tp.root_device_name = device_name(options);
        tp.root_device = [index, gpu_layers](const LlamaModel& m, const Slice& slice, const ForwardConfig& c) {
            return make_vulkan_rank(m, slice, c, index, gpu_layers);
        };
#endif
    }
    auto decoder = std::make_unique<TensorParallelDecoder>(model, tp);
    setup.tensor_parallel = decoder.get();
    setup.decoder = std::move(decoder);
    return setup;
}

std::vector<NodeStepTime> node_step_times(const DecoderSetup& setup) {
    std::vector<NodeStepTime> out;
    if (setup.pipeline != nullptr) {
        const std::vector<StageInfo>& stages = setup.pipeline->stages();
        for (size_t s = 0; s < stages.size(); ++s) {
            if (stages[s].steps == 0) continue;
            out.push_back({stages[s].address, "stage " + std::to_string(s), stages[s].steps, stages[s].step_seconds});
        }
    } else if (setup.tensor_parallel != nullptr) {
        const std::vector<TpRankInfo>& ranks = setup.tensor_parallel->ranks();
        for (size_t r = 0; r < ranks.size(); ++r) {
            out.push_back({ranks[r].address, "rank " + std::to_string(r), ranks[r].steps, ranks[r].step_seconds});
        }
    }
    return out;
}

}  // namespace tessera
