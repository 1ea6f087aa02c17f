#include "cluster/planner/auto_plan.h"

#include "cluster/planner/speed_probe.h"
#include "cluster/planner/worker_survey.h"
#include "net/wire_key.h"
#include "ops/cpu_target.h"
#include "util/disk_speed.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/thread_pool.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

PlanSurvey survey_plans(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                        const ParallelOptions& options) {
    if (options.pipeline() || options.local > 1) {
        throw make_error("--auto chooses the plan itself: give it --workers, not --stages, --cluster or --local");
    }
    if (!options.weights.empty() || !options.stage_layers.empty()) {
        throw make_error("--auto sizes shares from measured speed: leave out --weights and --stage-layers");
    }
    const std::vector<HostPort> workers = parse_host_port_list(options.workers);
    if (workers.empty()) throw make_error("--auto needs the workers it may use (--workers HOST:PORT,...)");
    ChannelLimits limits;
    limits.io_timeout_ms = options.timeout_ms;
    const std::shared_ptr<const WireKey> key = key_from_flag_or_env(options.key_file);
    const std::vector<WorkerFacts> facts = survey_workers(model, workers, key.get(), limits, options.timeout_ms);

    PlanSurvey survey;
    ThreadPool pool(n_threads);
    survey.nodes.push_back({"root", probe_seconds(model, pool), available_memory_bytes(), {}, cpu_target_name(),
                            disk_read_bytes_per_second(model.path())});
    for (const WorkerFacts& f : facts) {
        survey.nodes.push_back(
            {f.address.str(), f.probe_seconds, f.free_memory, f.link, f.cpu_target, f.disk_read_bps, f.device});
    }
    const int64_t positions = static_cast<int64_t>(config.n_ctx) * std::max(1, config.n_seq);
    survey.options = plan_options(model, survey.nodes, options.fast,
                                  static_cast<int>(std::min<int64_t>(positions, INT32_MAX)), config.kv_types,
                                  !options.no_offload);
    const PlanOption& best = best_option(survey.options);
    survey.chosen = static_cast<size_t>(&best - survey.options.data());
    return survey;
}

std::string format_survey(const PlanSurvey& survey) {
    std::string out = "nodes (measured now):\n";
    const double root_probe = survey.nodes[0].probe_seconds;
    for (const NodeFacts& n : survey.nodes) {
        const double speed = n.probe_seconds > 0 ? root_probe / n.probe_seconds : 1.0;
        out += fmt::format("  {:<22} speed {:.2f}x the root, {:.0f} MiB free, {} {}", n.name, speed,
                           n.free_memory / 1048576.0, n.device.empty() ? "CPU" : "GPU",
                           !n.device.empty() ? n.device : n.cpu_target.empty() ? "?" : n.cpu_target);
        if (n.disk_read_bps > 0) out += fmt::format(", disk {:.0f} MB/s", n.disk_read_bps / 1e6);
        if (&n != &survey.nodes[0]) {
            out += fmt::format(", link: round trip {:.3f} ms, {:.0f} Mbit/s", n.link.rtt_seconds * 1e3,
                               n.link.bytes_per_second * 8e-6);
        }
        out += "\n";
    }
    out += "plans (predicted for one stream):\n";
    for (size_t i = 0; i < survey.options.size(); ++i) {
        const PlanOption& o = survey.options[i];
        std::string layers;
        if (o.stages.size() > 1) {
            layers = ", layers";
            for (size_t s = 0; s < o.stage_layers.size(); ++s) {
                layers += s ? "+" : " ";
                layers += std::to_string(o.stage_layers[s]);
            }
        }
        const std::string exchange =
            o.kind == PlanKind::TensorParallel
                ? fmt::format(", {}{}", partial_topology_name(o.exchange), o.partial_bands > 1 ? " in bands" : "")
                : "";
        out += fmt::format("  {} {:<48} {:8.2f} tok/s  (compute {:.2f} ms + network {:.2f} ms{}{}){}\n",
                           i == survey.chosen ? "*" : " ", describe_option(o, survey.nodes), 1.0 / o.seconds(),
                           o.compute_seconds * 1e3, o.network_seconds * 1e3, layers, exchange,
                           o.fits ? (o.streaming.empty() ? "" : "  " + o.streaming) : "  does not fit: " + o.why_not);
    }
    const PlanOption& chosen = survey.options[survey.chosen];
    const PlanOption& single = survey.options[0];
    out += fmt::format("chosen: {}, {:.2f}x one node{}\n", describe_option(chosen, survey.nodes),
                       single.fits ? single.seconds() / chosen.seconds() : 0.0,
                       single.fits ? "" : " (the model does not fit on the root alone)");
    // Why, against the next best plan that fits.
    const PlanOption* next = nullptr;
    for (const PlanOption& o : survey.options) {
        if (&o != &chosen && o.fits && (next == nullptr || o.seconds() < next->seconds())) next = &o;
    }
    if (next != nullptr) {
        out += fmt::format("why: {:.2f} ms a token against {:.2f} ms for {} (compute {:.2f} against {:.2f} ms, network "
                           "{:.2f} against {:.2f} ms)\n",
                           chosen.seconds() * 1e3, next->seconds() * 1e3, describe_option(*next, survey.nodes),
                           chosen.compute_seconds * 1e3, next->compute_seconds * 1e3, chosen.network_seconds * 1e3,
                           next->network_seconds * 1e3);
    }
    return out;
}

ParallelOptions chosen_plan_options(const PlanSurvey& survey, const ParallelOptions& options) {
    ParallelOptions out = options;
    out.auto_plan = false;
    out.workers.clear();
    const PlanOption& o = survey.options[survey.chosen];
    if (o.kind == PlanKind::TensorParallel) {
        // The exchange the costing chose from the links, unless one was asked for.
        if (options.exchange == "auto") {
            out.exchange = partial_topology_name(o.exchange);
            // Bands where they were costed cheapest, unless some were asked for.
            if (options.partial_bands == 1) out.partial_bands = o.partial_bands;
        }
        for (size_t k = 1; k < o.stages[0].size(); ++k) {
            if (k > 1) out.workers += ",";
            out.workers += survey.nodes[o.stages[0][k]].name;
        }
    } else if (o.kind != PlanKind::Single) {
        for (size_t s = 0; s < o.stages.size(); ++s) {
            if (s) out.stages += "/";
            for (size_t k = 0; k < o.stages[s].size(); ++k) {
                if (k) out.stages += ",";
                out.stages += survey.nodes[o.stages[s][k]].name;
            }
        }
    }
    return out;
}

}  // namespace tessera
