// tessera run: generate text from a prompt on this machine.
#include "apps/attention_flags.h"
#include "apps/grammar_flags.h"
#include "engine/grammar_constraint.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/plan_decoder.h"
#include "engine/generation.h"
#include "engine/supervised_decoder.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"
#include "util/system_memory.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

namespace tessera {

namespace {

struct RunOptions {
    DraftOptions draft;
    std::string model;
    std::string prompt;
    std::string prompt_file;
    int n_predict = -1;
    bool ignore_eos = false;
    int n_ctx = 0;
    int n_batch = 512;
    int n_threads = 0;
    SamplerParams sampler;
    int64_t seed = -1;
    AttentionFlags attention;
    GrammarFlags grammar;
    std::string context_full = "stop";
    int n_keep = 0;
    int evict_recent = -1;
    bool json = false;
    bool verbose = false;
    ParallelOptions parallel;
};


// llama.cpp's cap on the default context: a model's training context can be
// far larger than what a small node should reserve for its KV cache.
constexpr int kDefaultContextCap = 4096;

void run(const RunOptions& o) {
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    std::string prompt = o.prompt;
    if (!o.prompt_file.empty()) {
        std::ifstream in(o.prompt_file, std::ios::binary);
        if (!in) throw make_error("{}: cannot read the prompt file", o.prompt_file);
        std::ostringstream text;
        text << in.rdbuf();
        prompt = text.str();
    }
    const KvCacheTypes kv_types = resolve_cache_types(o.attention);
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);

    const LlamaModel model(model_path);
    const ModelHParams& hp = model.hparams();
    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(hp.n_ctx_train, kDefaultContextCap);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    if (tokenizer->vocab().size() != hp.n_vocab) {
        throw make_error("{}: the tokenizer has {} tokens but the embedding has {}", model_path,
                         tokenizer->vocab().size(), hp.n_vocab);
    }
    const std::vector<int32_t> prompt_tokens = tokenize_prompt(*tokenizer, prompt, n_ctx);

    ForwardConfig config;
    config.n_ctx = n_ctx;
    config.kv_types = kv_types;
    config.sparse = resolve_sparse(o.attention);
    if (o.context_full != "stop" && o.context_full != "shift" && o.context_full != "evict") {
        throw make_error("--context-full must be stop, shift or evict (got '{}')", o.context_full);
    }
    // Eviction ranks positions by the attention they received: every node counts it.
    config.track_attention = o.context_full == "evict";
    config.n_batch = o.n_batch;
    // Distributed plans run supervised: a lost edge or node is recovered
    // from (supervised_decoder.h); a single process needs nothing of it.
    PlanDecoder plan = make_plan_decoder(model, config, n_threads, o.parallel);
    Decoder& decoder = plan.decoder();
    const SupervisedDecoder* supervised = plan.supervised.get();
    if (!o.json) print_plan(plan.setup());

    GenerationParams params;
    params.n_predict = o.n_predict;
    params.stop_at_eos = !o.ignore_eos;
    params.sampler = o.sampler;
    params.sampler.seed = seed_of(o.seed);
    const std::unique_ptr<Drafter> drafter = make_drafter(o.draft, model, n_ctx, n_threads, params);
    params.drafter = drafter.get();
    if (o.context_full == "shift") params.context_full = GenerationParams::ContextFull::kShift;
    if (o.context_full == "evict") params.context_full = GenerationParams::ContextFull::kEvict;
    if (o.n_keep < 0 || o.n_keep >= n_ctx / 2) {
        throw make_error("--keep {} must be 0 or more and under half the context ({})", o.n_keep, n_ctx);
    }
    params.n_keep = o.n_keep;
    params.evict_recent = o.evict_recent >= 0 ? o.evict_recent : std::max(1, n_ctx / 8);
    if (params.evict_recent >= n_ctx / 2) {
        throw make_error("--evict-recent {} must be under half the context ({})", params.evict_recent, n_ctx);
    }

    const std::shared_ptr<const Grammar> grammar = resolve_grammar(o.grammar);
    std::optional<GrammarConstraint> constraint;
    if (grammar) {
        constraint.emplace(grammar, vocabulary_pieces(*tokenizer));
        params.constraint = &*constraint;
    }

    if (!o.json) {
        std::fputs(prompt.c_str(), stdout);
        std::fflush(stdout);
    }
    const GenerationResult result = generate(decoder, *tokenizer, prompt_tokens, params, [&](const std::string& piece) {
        if (o.json) return;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
    });

    const DecoderSetup& setup = plan.setup();
    const std::vector<EdgeHealth> edges = supervised ? supervised->edge_health() : std::vector<EdgeHealth>();
    const RecoveryStats recovery = supervised ? supervised->recovery_stats() : RecoveryStats();
    const double prompt_tps = result.prompt_seconds > 0 ? result.prompt_tokens.size() / result.prompt_seconds : 0.0;
    const double gen_tps = result.generation_seconds > 0 ? result.tokens.size() / result.generation_seconds : 0.0;
    if (o.json) {
        nlohmann::json j;
        j["model"] = model_path;
        j["fingerprint"] = model.file().fingerprint_hex();
        j["prompt_ids"] = result.prompt_tokens;
        j["prompt_tokens"] = result.prompt_tokens.size();
        j["tokens"] = result.tokens;
        j["text"] = result.text;
        j["stop_reason"] = result.stop_reason;
        j["context_shifts"] = result.shifts;
        j["seed"] = params.sampler.seed;
        j["threads"] = n_threads;
        j["ranks"] = setup.tensor_parallel != nullptr ? setup.tensor_parallel->ranks().size() : 1;
        if (setup.pipeline != nullptr) j["stages"] = setup.pipeline->stages().size();
        if (setup.sequence_parallel != nullptr) {
            j["prefill"] = nlohmann::json::array();
            for (const SpNodeInfo& node : setup.sequence_parallel->nodes()) {
                j["prefill"].push_back({{"node", node.address}, {"pos0", node.last_chunk.pos0},
                                        {"tokens", node.last_chunk.n_tok}, {"bytes_sent", node.bytes_sent},
                                        {"bytes_received", node.bytes_received}});
            }
            const SpPrefillDecoder& sp = *setup.sequence_parallel;
            if (sp.group() != nullptr || sp.pipeline() != nullptr) {
                const SpHandoffInfo& h = sp.handoff();
                j["handoff"] = {{"plan", sp.group() != nullptr ? "tp" : "pipeline"},
                                {"nodes", sp.group() != nullptr ? sp.group()->ranks().size() : sp.pipeline()->stages().size()},
                                {"positions", h.positions}, {"bytes_sent", h.bytes_sent}, {"ms", h.seconds * 1e3}};
            }
        }
        j["mode"] = plan.options.mode();
        j["plan"] = plan_json(setup);
        if (setup.local != nullptr && setup.local->hparams().has_experts()) {
            // How often a token's experts were its predecessors' (what a cache
            // of recent experts would serve), beside what chance gives: over
            // the prompt and over the generated tokens.
            const double share = static_cast<double>(setup.local->hparams().n_expert_used) /
                                 setup.local->hparams().n_expert;
            const auto reuse_json = [&](const SliceForward::ExpertReuse& r) {
                const double n = static_cast<double>(std::max<uint64_t>(r.choices, 1));
                return nlohmann::json{{"choices", r.choices},
                                      {"previous_token", static_cast<double>(r.previous) / n},
                                      {"recent_tokens", static_cast<double>(r.recent) / n}};
            };
            j["expert_reuse"] = {{"prompt", reuse_json(setup.local->prompt_expert_reuse())},
                                 {"generation", reuse_json(setup.local->expert_reuse())},
                                 {"last_tokens", SliceForward::kRecentTokens},
                                 {"chance_previous_token", share},
                                 {"chance_recent_tokens", 1.0 - std::pow(1.0 - share, SliceForward::kRecentTokens)}};
        }
        j["n_ctx"] = n_ctx;
        j["peak_resident_bytes"] = peak_resident_memory_bytes();
        j["edges"] = nlohmann::json::array();
        for (const EdgeHealth& e : edges) {
            j["edges"].push_back({{"node", e.node}, {"role", e.role}, {"round_trip_ms", e.round_trip_ms},
                                  {"bytes_sent", e.bytes_sent}, {"bytes_received", e.bytes_received},
                                  {"retries", e.retries}, {"lost", e.lost}});
        }
        j["recovery"] = {{"recoveries", recovery.recoveries}, {"attempts", recovery.attempts},
                         {"ms_lost", recovery.seconds_lost * 1e3}, {"replaced", recovery.replaced}};
        if (drafter) {
            j["speculative"] = {{"draft", drafter->name()},
                                {"traversals", result.traversals},
                                {"drafted", result.drafted},
                                {"accepted", result.accepted},
                                {"draft_ms", result.draft_seconds * 1e3}};
            if (o.draft.ahead) {
                j["speculative"]["drafts_ahead"] = result.drafts_ahead;
                j["speculative"]["draft_ahead_ms"] = result.draft_ahead_seconds * 1e3;
            }
        }
        j["timings"] = {{"prompt_ms", result.prompt_seconds * 1e3},
                        {"prompt_tokens_per_second", prompt_tps},
                        {"generation_ms", result.generation_seconds * 1e3},
                        {"generated_tokens", result.tokens.size()},
                        {"generation_tokens_per_second", gen_tps}};
        const std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::printf("%s\n", out.c_str());
    } else {
        std::printf("\n");
        std::fprintf(stderr, "\nprompt:     %5zu tokens in %9.2f ms (%10.2f tokens/s)\n", result.prompt_tokens.size(),
                     result.prompt_seconds * 1e3, prompt_tps);
        std::fprintf(stderr, "generation: %5zu tokens in %9.2f ms (%10.2f tokens/s), stopped by %s\n",
                     result.tokens.size(), result.generation_seconds * 1e3, gen_tps, result.stop_reason.c_str());
        if (result.stop_reason == "context") {
            std::fprintf(stderr,
                         "the context of %d tokens is full (-c sets it; --context-full shift or evict goes on past it)\n",
                         n_ctx);
        }
        if (result.shifts > 0) {
            std::fprintf(stderr, "context %s %d times (kept the first %d tokens%s)\n",
                         o.context_full == "evict" ? "evicted" : "shifted", result.shifts, o.n_keep,
                         prompt_tokens[0] == tokenizer->vocab().bos_id ? " after BOS" : "");
        }
        if (drafter) {
            std::fprintf(stderr, "speculative: %s, %d of %d drafted tokens accepted (%.1f%%), %.2f tokens per traversal\n",
                         drafter->name().c_str(), result.accepted, result.drafted,
                         result.drafted > 0 ? 100.0 * result.accepted / result.drafted : 0.0,
                         result.traversals > 0 ? static_cast<double>(result.tokens.size() - 1) / result.traversals : 0.0);
            if (o.draft.ahead) {
                std::fprintf(stderr, "drafted ahead: %d of %d traversals started on a draft made during the one before "
                             "(%.1f ms drafting between traversals, %.1f ms during them)\n",
                             result.drafts_ahead, result.traversals, result.draft_seconds * 1e3,
                             result.draft_ahead_seconds * 1e3);
            }
        }
        if (setup.sequence_parallel != nullptr) print_sequence_chunks(*setup.sequence_parallel);
        if (o.verbose && supervised) {
            std::fprintf(stderr, "\nedge health (root to node):\n%-24s %-9s %10s %14s %14s %8s\n", "node", "role",
                         "rtt ms", "bytes sent", "bytes recv", "retries");
            for (const EdgeHealth& e : edges) {
                std::fprintf(stderr, "%-24s %-9s %10.3f %14llu %14llu %8d%s\n", e.node.c_str(), e.role.c_str(),
                             e.round_trip_ms, static_cast<unsigned long long>(e.bytes_sent),
                             static_cast<unsigned long long>(e.bytes_received), e.retries, e.lost ? "  (lost)" : "");
            }
            std::fprintf(stderr, "recoveries: %d (%d plans built), %.1f ms lost", recovery.recoveries,
                         recovery.attempts, recovery.seconds_lost * 1e3);
            for (const std::string& r : recovery.replaced) std::fprintf(stderr, "; %s", r.c_str());
            std::fprintf(stderr, "\n");
        }
    }
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt on this machine");
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled models/stories260K.gguf)");
    cmd->add_option("-p,--prompt", o->prompt, "Prompt text (empty: start from BOS)");
    cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
    cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past the end-of-text token (as llama.cpp's --ignore-eos)");
    cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (-1: until end of text or a full context)")
        ->capture_default_str();
    cmd->add_option("-b,--batch-size", o->n_batch, "Prompt positions processed at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("-c,--ctx-size", o->n_ctx, "Context size in tokens (0: the model's, at most 4096)")
        ->capture_default_str();
    cmd->add_option("-t,--threads", o->n_threads, "Threads (0: one per CPU)")->capture_default_str();
    add_parallel_flags(cmd, o->parallel);
    add_sampler_flags(cmd, o->sampler, o->seed);
    add_draft_flags(cmd, o->draft);
    add_draft_ahead_flag(cmd, o->draft);
    add_attention_flags(cmd, o->attention);
    add_grammar_flags(cmd, o->grammar);
    cmd->add_option("--context-full", o->context_full,
                    "When the context is full: stop; shift (keep --keep tokens, drop the oldest half of the rest); or "
                    "evict (drop the half that received the least attention, H2O)")
        ->capture_default_str();
    cmd->add_option("--evict-recent", o->evict_recent,
                    "With --context-full evict: the last N positions are never evicted (default: an eighth of the context)");
    cmd->add_option("--keep", o->n_keep, "Tokens of the prompt kept by a context shift (after BOS)")
        ->capture_default_str();
    cmd->add_flag("-v,--verbose", o->verbose, "After generating, print each edge's health (round trip, bytes, retries) and the time lost recovering");
    cmd->add_flag("--json", o->json, "Print one JSON object at the end (tokens, text, prompt_tokens, timings) instead of streaming");
    cmd->callback([o] { run(*o); });
}

}  // namespace tessera
