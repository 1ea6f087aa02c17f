// tessera bench: prompt and generation speed of one model, as llama-bench's
// pp and tg tests, plus how close generation comes to the memory bandwidth.
// With a draft (--draft-model, --draft ngram): plain against speculative
// greedy generation from a real prompt instead (eval/speculative_bench.h).
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/plan_decoder.h"
#include "eval/bench.h"
#include "eval/speculative_bench.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "ops/cpu_target.h"
#include "ops/group_prefetch.h"
#include "util/error.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

namespace tessera {

namespace {

struct BenchOptions {
    std::string model;
    int n_prompt = 512;
    int n_gen = 128;
    int n_threads = 0;
    int reps = 5;
    int n_batch = 512;
    bool json = false;
    bool all_logits = false;
    ParallelOptions parallel;
    AttentionFlags attention;
    DraftOptions draft;
    std::string prompt = "Once upon a time";
    int depth = 0;
    std::string depth_fill = "prompt";
};

void speculative_main(const BenchOptions& o) {
    const std::string path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(path);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = std::min(model.hparams().n_ctx_train, 4096);
    config.n_batch = o.n_batch;
    config.kv_types = resolve_cache_types(o.attention);
    config.sparse = resolve_sparse(o.attention);
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);
    const std::vector<int32_t> prompt = tokenize_prompt(*tokenizer, o.prompt, config.n_ctx);
    if (static_cast<int64_t>(prompt.size()) + o.n_gen > config.n_ctx) {
        throw make_error("{} prompt tokens and {} generated do not fit the context of {}", prompt.size(), o.n_gen,
                         config.n_ctx);
    }
    PlanDecoder plan = make_plan_decoder(model, config, n_threads, o.parallel);
    if (!o.json) print_plan(plan.setup());
    GenerationParams bounds;
    const std::unique_ptr<Drafter> drafter = make_drafter(o.draft, model, config.n_ctx, n_threads, bounds);
    const SpeculativeBenchResult r = run_speculative_bench(plan.decoder(), *tokenizer, *drafter, prompt, o.n_gen, o.reps,
                                                           bounds.draft_max, bounds.draft_min, bounds.draft_ahead);
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };
    const double plain = median(r.plain_tps), spec = median(r.speculative_tps), ahead = median(r.ahead_tps);
    if (o.json) {
        nlohmann::json j{{"model", path},
                                 {"draft", drafter->name()},
                                 {"mode", plan.options.mode()},
                                 {"tokens", r.tokens},
                                 {"reps", o.reps},
                                 {"plain_tps", r.plain_tps},
                                 {"speculative_tps", r.speculative_tps},
                                 {"plain_tps_median", plain},
                                 {"speculative_tps_median", spec},
                                 {"speedup", plain > 0 ? spec / plain : 0.0},
                                 {"acceptance", r.acceptance()},
                                 {"tokens_per_traversal", r.tokens_per_traversal()},
                                 {"traversal_ms", r.traversal_ms()},
                                 {"draft_ms", r.draft_ms()},
                                 {"drafted", r.drafted},
                                 {"accepted", r.accepted}};
        if (bounds.draft_ahead) {
            j["ahead_tps"] = r.ahead_tps;
            j["ahead_tps_median"] = ahead;
            j["ahead_speedup"] = spec > 0 ? ahead / spec : 0.0;
            j["ahead_traversals"] = r.ahead_traversals;
            j["drafts_ahead"] = r.drafts_ahead;
            j["ahead_draft_ms"] = r.ahead_draft_ms();
            j["ahead_hidden_ms"] = r.ahead_hidden_ms();
        }
        std::puts(j.dump().c_str());
        return;
    }
    fmt::print("model: {}, draft: {}, {} tokens from \"{}\", repetitions: {}\n", path, drafter->name(), r.tokens,
               o.prompt, o.reps);
    fmt::print("| {:>12} | {:>12} |\n", "test", "t/s median");
    fmt::print("| {:->12} | {:->12} |\n", "", "");
    fmt::print("| {:>12} | {:>12.2f} |\n", "plain", plain);
    fmt::print("| {:>12} | {:>12.2f} |\n", "speculative", spec);
    if (bounds.draft_ahead) fmt::print("| {:>12} | {:>12.2f} |\n", "draft ahead", ahead);
    fmt::print("speedup {:.2f}x; {} of {} drafted tokens accepted ({:.1f}%), {:.2f} tokens per traversal, {:.2f} ms per "
               "traversal of which {:.3f} ms drafting\n",
               plain > 0 ? spec / plain : 0.0, r.accepted, r.drafted, 100.0 * r.acceptance(), r.tokens_per_traversal(),
               r.traversal_ms(), r.draft_ms());
    if (bounds.draft_ahead) {
        fmt::print("drafting ahead: {:.2f}x speculative; {} of {} traversals started on a draft made during the one "
                   "before; per traversal {:.3f} ms drafting between traversals, {:.3f} ms during them\n",
                   spec > 0 ? ahead / spec : 0.0, r.drafts_ahead, r.ahead_traversals,
                   r.ahead_draft_ms(),
                   r.ahead_hidden_ms());
    }
}

nlohmann::json rate_json(const BenchRate& rate) {
    return {{"tokens", rate.tokens}, {"tps", rate.tps}, {"tps_min", rate.min()}, {"tps_median", rate.median()}};
}

void bench_main(const BenchOptions& o) {
    if (!o.draft.model.empty() || !o.draft.kind.empty()) return speculative_main(o);
    BenchParams params;
    params.model_path = o.model.empty() ? default_model_path() : o.model;
    params.n_prompt = o.n_prompt;
    params.n_gen = o.n_gen;
    params.n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);
    params.parallel = o.parallel;
    params.reps = o.reps;
    params.n_batch = o.n_batch;
    params.kv_types = resolve_cache_types(o.attention);
    params.sparse = resolve_sparse(o.attention);
    params.depth = o.depth;
    if (o.depth_fill != "prompt" && o.depth_fill != "random") {
        throw make_error("--depth-fill must be prompt or random (got '{}')", o.depth_fill);
    }
    params.depth_random = o.depth_fill == "random";
    params.all_logits = o.all_logits;
    const BenchResult r = run_bench(params);

    if (o.json) {
        nlohmann::json j = {
            {"model", params.model_path},
            {"type", r.model_type},
            {"model_bytes", r.model_bytes},
            {"n_params", r.n_params},
            {"threads", params.n_threads},
            {"cpu_target", cpu_target_name()},
            {"prefetch", group_prefetch_name(group_prefetch())},
            {"reps", params.reps},
            {"pp", rate_json(r.pp)},
            {"tg", rate_json(r.tg)},
            {"weight_bytes_per_token", r.weight_bytes_per_token},
            {"layer_weight_bytes_per_token", r.layer_weight_bytes_per_token},
            {"wo_bytes_per_token", r.wo_bytes_per_token},
            {"w_down_bytes_per_token", r.w_down_bytes_per_token},
            {"mem_bandwidth_gbs", r.mem_bandwidth_gbs},
            {"tg_ceiling_gbs", r.tg_ceiling_gbs},
            {"tg_bandwidth_gbs", r.tg_bandwidth_gbs()},
            {"tg_bandwidth_fraction", r.tg_bandwidth_fraction()},
            {"mem_peak_gbs", r.mem_peak_gbs},
            {"probe_bytes", r.probe_bytes},
            {"probe_prefetch", r.probe_prefetch},
            {"tg_peak_fraction", r.tg_peak_fraction()},
            {"mode", params.parallel.mode()},
            {"ranks", r.ranks},
            {"depth", params.depth},
            {"depth_fill", o.depth_fill},
            {"attention", describe(params.sparse)},
            {"cache_type_k", quant_type_name(params.kv_types.k)},
            {"cache_type_v", quant_type_name(params.kv_types.v)},
            {"logits", params.all_logits ? "all" : "top-40"},
        };
        if (r.ranks > 1) {
            j["tp"] = {{"wire_bytes_per_token_per_worker", r.wire_bytes_per_token_per_worker},
                       {"own_ms_per_token", r.own_ms_per_token},
                       {"wait_ms_per_token", r.wait_ms_per_token},
                       {"attention_wait_ms_per_token", r.attention_wait_ms_per_token},
                       {"ffn_wait_ms_per_token", r.ffn_wait_ms_per_token},
                       {"syncs_per_token", r.syncs_per_token},
                       {"sealed", r.sealed},
                       {"moe_split", r.moe_split},
                       {"handshake_ms", r.handshake_ms}};
        }
        std::puts(j.dump().c_str());
        return;
    }
    fmt::print("model: {} ({}, {:.1f} MiB, {:.2f} B params), threads: {}, CPU target: {}, prefetch: {}, "
               "repetitions: {}\n",
               params.model_path, r.model_type, r.model_bytes / 1048576.0, r.n_params / 1e9, params.n_threads,
               cpu_target_name(), group_prefetch_name(group_prefetch()), params.reps);
    if (params.depth > 0) {
        fmt::print("after a history of {} positions ({}), attention {}, KV cache K {} V {}\n", params.depth,
                   params.depth_random ? "random K/V rows" : "a random prompt", describe(params.sparse),
                   quant_type_name(params.kv_types.k), quant_type_name(params.kv_types.v));
    }
    fmt::print("| {:>8} | {:>12} | {:>12} |\n", "test", "t/s min", "t/s median");
    fmt::print("| {:->8} | {:->12} | {:->12} |\n", "", "", "");
    if (r.pp.tokens > 0) fmt::print("| {:>8} | {:>12.2f} | {:>12.2f} |\n", fmt::format("pp{}", r.pp.tokens), r.pp.min(), r.pp.median());
    if (r.tg.tokens > 0) fmt::print("| {:>8} | {:>12.2f} | {:>12.2f} |\n", fmt::format("tg{}", r.tg.tokens), r.tg.min(), r.tg.median());
    fmt::print("weights read per generated token: {:.1f} MiB\n", r.weight_bytes_per_token / 1048576.0);
    fmt::print("memory read bandwidth ({} threads, {} MiB read, prefetch {}: the fastest read loop): {:.2f} GB/s "
               "sustained{}; peak of short reads {:.2f} GB/s\n",
               params.n_threads, r.probe_bytes >> 20, r.probe_prefetch, r.mem_bandwidth_gbs,
               r.tg.tokens > 0 ? " (median over tg repetitions of the higher of the read loops before and after each, "
                                 "each as long as one)"
                               : " over 1 s",
               r.mem_peak_gbs);
    if (r.ranks > 1) {
        fmt::print("tensor parallel ({} ranks, {}{}, {}, {}): {:.1f} KiB on the wire per token per worker, {} syncs per "
                   "token; root computes {:.2f} ms and waits {:.2f} ms per token ({:.2f} at the attention syncs, "
                   "{:.2f} at the FFN syncs); key handshake {:.2f} ms\n",
                   r.ranks, params.parallel.mode(), r.moe_split.empty() ? "" : ", experts split by " + r.moe_split,
                   r.sealed ? "sealed" : "plain",
                   params.all_logits ? "every logit gathered" : "the logits of a sampler's top 40",
                   r.wire_bytes_per_token_per_worker / 1024.0, r.syncs_per_token, r.own_ms_per_token,
                   r.wait_ms_per_token, r.attention_wait_ms_per_token, r.ffn_wait_ms_per_token, r.handshake_ms);
    }
    if (r.tg.tokens > 0 && vulkan_device_of(params.parallel.device)) {
        // The weights stream from the GPU's memory: the CPU's read loop is no ceiling for them.
        fmt::print("generation streams {:.2f} GB/s of weights from the device's memory (--device {}; the read loop "
                   "above measures this CPU's, not the device's)\n",
                   r.tg_bandwidth_gbs(), params.parallel.device);
    } else if (r.tg.tokens > 0) {
        fmt::print("generation streams {:.2f} GB/s; each repetition against its own ceiling: median {:.1f}% "
                   "({:.1f}% of the peak)\n",
                   r.tg_bandwidth_gbs(), 100.0 * r.tg_bandwidth_fraction(), 100.0 * r.tg_peak_fraction());
    }
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand("bench", "Measure prompt (pp) and generation (tg) speed, like llama-bench");
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled stories260K)");
    cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens of the pp test (0: skip it)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("-d,--depth", o->depth, "Positions of history before each test (llama-bench's -d)")
        ->capture_default_str();
    cmd->add_option("--depth-fill", o->depth_fill,
                    "The history: prompt (random tokens, evaluated) or random (K/V rows stored directly; one process)")
        ->capture_default_str();
    cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens of the tg test (0: skip it)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("-t,--threads", o->n_threads, "Threads (0: one per core)")->capture_default_str()->check(CLI::Range(0, 1024));
    cmd->add_option("-r,--repetitions", o->reps, "Timed repetitions of each test (after one warm-up)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("-b,--batch-size", o->n_batch, "Prompt positions processed at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
    cmd->add_flag("--all-logits", o->all_logits,
                  "Distributed plans gather every logit of each token (as perplexity and logprobs do), not only the "
                  "top 40 a default sampler reads");
    add_parallel_flags(cmd, o->parallel);
    add_attention_flags(cmd, o->attention);
    add_draft_flags(cmd, o->draft);
    add_draft_ahead_flag(cmd, o->draft);
    cmd->add_option("--prompt", o->prompt, "With a draft: the prompt both generations start from")->capture_default_str();
    cmd->callback([o] { bench_main(*o); });
}

}  // namespace tessera
