#include "apps/plan_decoder.h"

#include "cluster/planner/auto_plan.h"

#include "net/tcp.h"
#include "util/error.h"

#include <cstdio>
#include <random>

namespace tessera {

PlanDecoder make_plan_decoder(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                              const ParallelOptions& given) {
    PlanDecoder plan;
    // --auto is settled once, before any recovery: a lost node is then
    // replaced within the chosen plan, not re-planned.
    ParallelOptions options = given;
    if (given.auto_plan) {
        const PlanSurvey survey = survey_plans(model, config, n_threads, given);
        std::fprintf(stderr, "%s", format_survey(survey).c_str());
        options = chosen_plan_options(survey, given);
    }
    plan.options = options;
    if (options.parallel()) {
        RecoveryOptions recovery;
        recovery.spares = parse_host_port_list(options.spares);
        recovery.budget_ms = options.recover_ms;
        plan.supervised = std::make_unique<SupervisedDecoder>(
            model, config, n_threads, options, recovery,
            [](const std::string& line) { std::fprintf(stderr, "\n%s\n", line.c_str()); });
    } else {
        plan.local = make_decoder(model, config, n_threads, options);
    }
    return plan;
}

void add_sampler_flags(CLI::App* cmd, SamplerParams& sampler, int64_t& seed) {
    cmd->add_option("--temp", sampler.temperature, "Temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--top-k", sampler.top_k, "Top-k sampling (0: off)")->capture_default_str();
    cmd->add_option("--top-p", sampler.top_p, "Top-p (nucleus) sampling (1: off)")->capture_default_str();
    cmd->add_option("--min-p", sampler.min_p, "Min-p sampling (0: off)")->capture_default_str();
    cmd->add_option("--repeat-penalty", sampler.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
    cmd->add_option("--repeat-last-n", sampler.repeat_last_n, "Tokens the repetition penalty looks back over")
        ->capture_default_str();
    cmd->add_option("-s,--seed", seed, "Sampling seed (-1: random)")->capture_default_str();
}

void add_conversation_flags(CLI::App* cmd, std::string& chat_template, int& n_ctx, int& n_batch, int& n_threads) {
    cmd->add_option("--chat-template", chat_template,
                    "Template: a built-in name (chatml, llama3, gemma, phi3, mistral) or a Jinja file; default: the "
                    "model's tokenizer.chat_template, else ChatML");
    cmd->add_option("-c,--ctx-size", n_ctx, "Context size in tokens (0: the model's, at most 4096)")->capture_default_str();
    cmd->add_option("-b,--batch-size", n_batch, "Prompt positions processed at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("-t,--threads", n_threads, "Threads (0: one per CPU)")->capture_default_str();
}

void add_draft_flags(CLI::App* cmd, DraftOptions& draft) {
    cmd->add_option("--draft-model", draft.model,
                    "Speculative decoding: a small GGUF with the same vocabulary, run on this node, proposes tokens that "
                    "the model verifies in one traversal (output unchanged)");
    cmd->add_option("--draft", draft.kind, "Speculative decoding without a draft model: 'ngram' (prompt lookup)")
        ->check(CLI::IsMember({"ngram"}));
    cmd->add_option("--draft-max", draft.max, "Most tokens drafted per traversal (adapted to the acceptance rate)")
        ->capture_default_str()
        ->check(CLI::Range(1, SliceForward::kRowwiseRows - 1));
    cmd->add_option("--draft-min", draft.min, "Fewest drafted tokens worth a verification")
        ->capture_default_str()
        ->check(CLI::Range(1, SliceForward::kRowwiseRows - 1));
}

void add_draft_ahead_flag(CLI::App* cmd, DraftOptions& draft) {
    cmd->add_flag("--draft-ahead", draft.ahead,
                  "Draft the next tokens while the model verifies the last ones (hides drafting behind traversals "
                  "that wait on other nodes; output unchanged)");
}

std::unique_ptr<Drafter> make_drafter(const DraftOptions& draft, const LlamaModel& target, int n_ctx, int n_threads,
                                      GenerationParams& params) {
    if (!draft.model.empty() && !draft.kind.empty()) throw make_error("use either --draft-model or --draft, not both");
    if (draft.min > draft.max) throw make_error("--draft-min {} is above --draft-max {}", draft.min, draft.max);
    params.draft_max = draft.max;
    params.draft_min = draft.min;
    params.draft_ahead = draft.ahead;
    if (draft.ahead && draft.model.empty() && draft.kind.empty()) {
        throw make_error("--draft-ahead needs a drafter: --draft-model FILE or --draft ngram");
    }
    if (!draft.model.empty()) return std::make_unique<ModelDrafter>(draft.model, target, n_ctx, n_threads);
    if (draft.kind == "ngram") return std::make_unique<NgramDrafter>();
    return nullptr;
}

uint64_t seed_of(int64_t seed) { return seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}(); }

}  // namespace tessera
