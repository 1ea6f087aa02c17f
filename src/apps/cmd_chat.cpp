// tessera chat: an interactive conversation in the terminal, on any plan.
// Each turn prefills only what the KV cache lacks; Ctrl-C stops the answer
// being written (a second Ctrl-C at the prompt, or Ctrl-D, leaves).
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/plan_decoder.h"
#include "engine/chat_session.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace tessera {

namespace {

struct ChatOptions {
    DraftOptions draft;
    std::string model;
    std::string system;
    std::string chat_template;
    int n_predict = -1;
    int n_ctx = 0;
    int n_batch = 512;
    int n_threads = 0;
    SamplerParams sampler;
    int64_t seed = -1;
    bool context_shift = false;
    ParallelOptions parallel;
    AttentionFlags attention;
};

std::atomic<bool> g_stop{false};
void on_interrupt(int) { g_stop.store(true); }

void chat(const ChatOptions& o) {
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(model_path);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    bool fallback = false;
    ChatTemplate chat_template(
        chat_template_source(o.chat_template, model.file().find_string("tokenizer.chat_template"), &fallback));
    if (fallback) std::fprintf(stderr, "chat: the model has no chat template; using ChatML\n");
    ForwardConfig config;
    config.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(model.hparams().n_ctx_train, 4096);
    config.n_batch = o.n_batch;
    config.kv_types = resolve_cache_types(o.attention);
    config.sparse = resolve_sparse(o.attention);
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);
    PlanDecoder plan = make_plan_decoder(model, config, n_threads, o.parallel);
    print_plan(plan.setup());
    ChatSession session(plan.decoder(), *tokenizer, std::move(chat_template), o.system, o.context_shift);

    GenerationParams params;
    params.n_predict = o.n_predict;
    params.sampler = o.sampler;
    params.sampler.seed = seed_of(o.seed);
    params.cancel = &g_stop;
    const std::unique_ptr<Drafter> drafter = make_drafter(o.draft, model, config.n_ctx, n_threads, params);
    params.drafter = drafter.get();
    std::fprintf(stderr, "chat: /clear forgets the conversation, /save FILE and /load FILE keep it, /exit leaves; "
                         "Ctrl-C stops an answer\n");
    std::string line;
    for (;;) {
        // At the prompt Ctrl-C leaves as usual; while answering it stops the answer.
        std::signal(SIGINT, SIG_DFL);
        std::fputs("\n> ", stdout);
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/clear") {
            session.clear();
            std::puts("(conversation cleared)");
            continue;
        }
        if (line.rfind("/save ", 0) == 0 || line.rfind("/load ", 0) == 0) {
            const std::string path = line.substr(6);
            try {
                if (line[1] == 's') {
                    std::ofstream(path) << session.messages().dump(2) << "\n";
                    std::printf("(saved %zu messages to %s)\n", session.messages().size(), path.c_str());
                } else {
                    std::ifstream in(path);
                    if (!in) throw make_error("{}: cannot read", path);
                    session.set_messages(nlohmann::json::parse(in));
                    std::printf("(loaded %zu messages from %s)\n", session.messages().size(), path.c_str());
                }
            } catch (const std::exception& e) {
                std::printf("(%s)\n", e.what());
            }
            continue;
        }
        g_stop.store(false);
        std::signal(SIGINT, on_interrupt);
        try {
            const ChatTurn turn = session.reply(line, params, [](const std::string& piece) {
                std::fwrite(piece.data(), 1, piece.size(), stdout);
                std::fflush(stdout);
            });
            const GenerationResult& g = turn.generation;
            const double tps = g.generation_seconds > 0 ? g.tokens.size() / g.generation_seconds : 0.0;
            std::fprintf(stderr, "\n[%zu tokens, %.2f tok/s; prompt %d tokens, %d from the cache, %.1f ms%s%s]\n",
                         g.tokens.size(), tps, turn.n_prompt, turn.n_reused, g.prompt_seconds * 1e3,
                         g.stop_reason == "cancelled" ? "; stopped" : "",
                         turn.n_dropped > 0 ? "; oldest messages dropped to fit" : "");
        } catch (const Error& e) {
            std::fprintf(stderr, "\nchat: %s\n", e.what());
        }
    }
    std::signal(SIGINT, SIG_DFL);
}

}  // namespace

void add_chat_command(CLI::App& app) {
    auto o = std::make_shared<ChatOptions>();
    CLI::App* cmd = app.add_subcommand("chat", "Chat with a model in the terminal (its chat template; any plan)");
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled models/stories260K.gguf)");
    cmd->add_option("--system", o->system, "System message");
    add_conversation_flags(cmd, o->chat_template, o->n_ctx, o->n_batch, o->n_threads);
    cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens per answer (-1: until the end of the turn)")
        ->capture_default_str();
    cmd->add_flag("--context-shift", o->context_shift,
                  "When the conversation outgrows the context, drop its oldest messages (the system message stays)");
    add_parallel_flags(cmd, o->parallel);
    add_attention_flags(cmd, o->attention);
    add_sampler_flags(cmd, o->sampler, o->seed);
    add_draft_flags(cmd, o->draft);
    add_draft_ahead_flag(cmd, o->draft);
    cmd->callback([o] { chat(*o); });
}

}  // namespace tessera
