// tessera serve: an OpenAI-compatible HTTP server (cpp-httplib) on any plan.
//   POST /v1/chat/completions, /v1/completions (streamed as server-sent
//   events or not), GET /v1/models, /health, /metrics (Prometheus text),
//   POST /tokenize, /detokenize; GET / (the chat page), /props (model,
//   context and plan, for the page).
// --parallel N slots (serve/slot_pool.h), each a sequence with its own KV
// cache: running requests' tokens go through the model together
// (engine/sequence_batcher.h); the request parser and response objects are
// serve/openai_api.h, /metrics serve/metrics.h. Up to
// --queue more wait their turn in arrival order (more get 503). A request
// takes the free slot whose cached tokens its prompt shares most of, so a
// conversation's next turn (its history resent) prefills only its new
// tokens. A client that disconnects mid-stream stops its generation at the
// next token.
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/plan_decoder.h"
#include "apps/web_page.h"
#include "engine/chat_session.h"
#include "engine/grammar_constraint.h"
#include "engine/prefix_cache.h"
#include "engine/sequence_batcher.h"
#include "engine/stop_strings.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "serve/metrics.h"
#include "serve/anthropic_api.h"
#include "serve/ollama_api.h"
#include "serve/openai_api.h"
#include "serve/slot_pool.h"
#include "util/error.h"
#include "util/timer.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

namespace tessera {

namespace {

using nlohmann::json;

struct ServeOptions {
    std::string model;
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key;
    std::string chat_template;
    int n_ctx = 0;
    int n_batch = 512;
    int n_threads = 0;
    int queue = 16;
    int n_parallel = 1;
    int prefill_chunk = 128;
    DraftOptions draft;
    size_t max_body = 1 << 20;
    bool ignore_eos = false;
    std::vector<std::string> aliases;
    ParallelOptions parallel;
    AttentionFlags attention;
};

class Server {
public:
    Server(const ServeOptions& o)
        : options_(o),
          model_path_(o.model.empty() ? default_model_path() : o.model),
          model_(model_path_),
          tokenizer_(make_tokenizer(load_vocab(model_.file()))),
          template_(chat_template_source(o.chat_template, model_.file().find_string("tokenizer.chat_template"))) {
        config_.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(model_.hparams().n_ctx_train, 4096);
        config_.n_batch = o.n_batch;
        config_.n_seq = o.n_parallel;
        config_.kv_types = resolve_cache_types(o.attention);
        config_.sparse = resolve_sparse(o.attention);
        plan_ = make_plan_decoder(model_, config_, o.n_threads > 0 ? o.n_threads : default_threads(o.parallel), o.parallel);
        if (plan_.decoder().n_seq() < o.n_parallel) {
            throw make_error("internal: --parallel {} but the plan keeps {} sequences", o.n_parallel,
                             plan_.decoder().n_seq());
        }
        print_plan(plan_.setup());
        // Speculative decoding: each slot drafts on its own (a draft model's
        // KV cache follows one conversation); its verifications join the
        // batches as eval_all runs.
        for (int slot = 0; slot < o.n_parallel; ++slot) {
            GenerationParams bounds;
            std::unique_ptr<Drafter> d = make_drafter(o.draft, model_, config_.n_ctx,
                                                      o.n_threads > 0 ? o.n_threads : default_threads(o.parallel), bounds);
            if (!d) break;
            draft_max_ = bounds.draft_max;
            draft_min_ = bounds.draft_min;
            drafters_.push_back(std::move(d));
        }
        BatcherOptions batching;
        batching.prefill_chunk = o.prefill_chunk;
        batching.node_times = [this] { return node_step_times(plan_.setup()); };
        batcher_ = std::make_unique<SequenceBatcher>(plan_.decoder(), batching);
        slots_ = std::make_unique<SlotPool>(o.n_parallel);
        const size_t slash = model_path_.find_last_of('/');
        model_id_ = slash == std::string::npos ? model_path_ : model_path_.substr(slash + 1);
        tool_format_ = tool_call_format(template_.source());
    }

    void run() {
        httplib::Server http;
        // A thread per running or waiting request, and a few for the rest
        // (/health, /metrics) so they answer while every slot is busy.
        const size_t http_threads = static_cast<size_t>(std::min(options_.queue + options_.n_parallel + 4, 512));
        http.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
        http.set_payload_max_length(options_.max_body);
        // A client that goes silent or trickles its request is dropped after
        // --timeout-ms without a byte (each wait is bounded), so it holds a
        // connection thread no longer than that.
        const int timeout_ms = options_.parallel.timeout_ms;
        http.set_read_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
        http.set_write_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
        http.set_keep_alive_timeout(std::max(1, timeout_ms / 1000));
        http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
            if (!res.body.empty()) return;  // a handler's own error object
            const char* message = res.status == 413 ? "the request body is larger than the server accepts"
                                  : res.status == 404 ? "no such endpoint"
                                                      : "request failed";
            res.set_content(dump_json(ApiError{res.status, message, "invalid_request_error", ""}.body()), "application/json");
        });
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            // The page itself is public; what it fetches needs the key.
            if (options_.api_key.empty() || req.path == "/health" || req.path == "/") {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            // Anthropic's clients send the key as x-api-key.
            if (req.get_header_value("Authorization") == "Bearer " + options_.api_key ||
                req.get_header_value("x-api-key") == options_.api_key) {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            fail(res, ApiError{401, "invalid or missing API key (Authorization: Bearer KEY)", "authentication_error", ""});
            return httplib::Server::HandlerResponse::Handled;
        });
        http.Get("/", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(std::string(web_page()), "text/html; charset=utf-8");
        });
        http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(dump_json(json{{"model", model_id_},
                                           {"n_ctx", config_.n_ctx},
                                           {"parallel", options_.n_parallel},
                                           {"plan", plan_json(plan_.setup())}}),
                            "application/json");
        });
        http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"status":"ok"})", "application/json");
        });
        http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            const json model = {{"id", model_id_}, {"object", "model"}, {"created", started_}, {"owned_by", "tessera"},
                                {"meta", {{"n_ctx", config_.n_ctx}, {"n_vocab", model_.hparams().n_vocab}}}};
            res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
        });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics_.text(batcher_->stats()), "text/plain; version=0.0.4");
        });
        http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
        http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
        http.Post("/v1/chat/completions",
                  [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
        http.Post("/v1/completions",
                  [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
        http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) { messages(req, res); });
        // Ollama's API, for the clients that speak it first (Open WebUI, editors).
        http.Post("/api/chat", [this](const httplib::Request& req, httplib::Response& res) { ollama(req, res, true); });
        http.Post("/api/generate", [this](const httplib::Request& req, httplib::Response& res) { ollama(req, res, false); });
        http.Get("/api/tags", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(dump_json(json{{"models", json::array({ollama_model()})}}), "application/json");
        });
        http.Post("/api/show", [this](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            const std::string name = body.is_object() ? body.value("model", body.value("name", std::string())) : "";
            try {
                check_model_name(name);
            } catch (const ApiError& e) {
                res.status = e.status;
                return res.set_content(dump_json(ollama_error(e)), "application/json");
            }
            json show = {{"modelfile", ""},
                         {"parameters", ""},
                         {"template", template_.source()},
                         {"details", ollama_model()["details"]},
                         {"model_info", {{"general.architecture", model_.file().find_string("general.architecture").value_or("")},
                                         {"context_length", config_.n_ctx},
                                         {"vocab_size", model_.hparams().n_vocab}}},
                         {"capabilities", json::array({"completion", "tools"})}};
            res.set_content(dump_json(show), "application/json");
        });
        http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"version":"0.6.4-tessera"})", "application/json");
        });
        const int port = options_.port == 0 ? http.bind_to_any_port(options_.host) : options_.port;
        if (options_.port != 0 && !http.bind_to_port(options_.host, port)) {
            throw make_error("cannot listen on {}:{}", options_.host, port);
        }
        if (port < 0) throw make_error("cannot listen on {}", options_.host);
        std::printf("listening on port %d\n", port);
        std::fflush(stdout);
        std::fprintf(stderr, "serve: http://%s:%d/v1 (model %s, context %d)\n", options_.host.c_str(), port,
                     model_id_.c_str(), config_.n_ctx);
        http.listen_after_bind();
    }

private:
    const ServeOptions options_;
    std::string model_path_;
    LlamaModel model_;
    std::unique_ptr<Tokenizer> tokenizer_;
    // The vocabulary's token texts sorted for grammar walks, built by the
    // first request with a response_format or grammar.
    ToolCallFormat tool_format_ = ToolCallFormat::kHermes;  // the template's syntax for tool calls
    std::once_flag pieces_once_;
    std::shared_ptr<const VocabularyPieces> pieces_;
    ChatTemplate template_;
    ForwardConfig config_;
    PlanDecoder plan_;
    std::string model_id_;
    int64_t started_ = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    std::unique_ptr<SequenceBatcher> batcher_;
    std::unique_ptr<SlotPool> slots_;
    std::vector<std::unique_ptr<Drafter>> drafters_;  // one per slot, or none
    int draft_max_ = 8, draft_min_ = 1;
    std::atomic<int> waiting_{0};
    std::atomic<uint64_t> next_id_{1};
    Metrics metrics_;

    void fail(httplib::Response& res, const ApiError& e) {
        ++metrics_.errors;
        res.status = e.status;
        res.set_content(dump_json(e.body()), "application/json");
    }

    void tokenize(const httplib::Request& req, httplib::Response& res) {
        const json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("content") || !body["content"].is_string()) {
            return fail(res, ApiError{400, "'content' must be a string", "invalid_request_error", "content"});
        }
        const bool add_special = body.value("add_special", false);
        const std::vector<int32_t> ids = tokenizer_->encode(body["content"].get<std::string>(), add_special, add_special);
        res.set_content(dump_json(json{{"tokens", ids}}), "application/json");
    }

    void detokenize(const httplib::Request& req, httplib::Response& res) {
        const json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
            return fail(res, ApiError{400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens"});
        }
        std::vector<int32_t> ids;
        for (const json& t : body["tokens"]) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer_->vocab().size()) {
                return fail(res, ApiError{400, "'tokens' holds an id outside the vocabulary", "invalid_request_error",
                                          "tokens"});
            }
            ids.push_back(t.get<int32_t>());
        }
        res.set_content(dump_json(json{{"content", decode(*tokenizer_, ids, true)}}), "application/json");
    }

    std::vector<int32_t> prompt_of(const CompletionRequest& r) {
        for (const auto& [token, bias] : r.logit_bias) {
            if (token >= tokenizer_->vocab().size()) {
                throw ApiError{400, "'logit_bias' names token " + std::to_string(token) + ", outside the vocabulary",
                               "invalid_request_error", "logit_bias"};
            }
        }
        nlohmann::ordered_json extra = nlohmann::ordered_json::object();
        if (!r.tools.empty() && r.tool_choice != ToolChoice::kNone) extra["tools"] = r.tools;
        std::vector<int32_t> tokens = r.chat ? chat_prompt_tokens(template_, *tokenizer_, r.messages, extra)
                                             : tokenizer_->encode(r.prompt, true, true);
        if (tokens.empty()) throw ApiError{400, "the prompt is empty", "invalid_request_error", "prompt"};
        if (static_cast<int64_t>(tokens.size()) >= config_.n_ctx) {
            throw ApiError{400,
                           "the prompt is " + std::to_string(tokens.size()) + " tokens but the context holds " +
                               std::to_string(config_.n_ctx),
                           "invalid_request_error", r.chat ? "messages" : "prompt"};
        }
        return tokens;
    }

    // Runs one request on the slot; text pieces go to `emit` with the
    // log-probabilities of the tokens since the last piece (when asked for);
    // it returns false when the client is gone (the generation then stops).
    using Emit = std::function<bool(const std::string&, const std::vector<TokenLogprob>&)>;
    // start: when the request arrived (for the time to its first text).
    CompletionResult generate(const CompletionRequest& r, const std::vector<int32_t>& prompt, double start,
                              const Emit& emit) {
        GenerationParams params;
        params.n_predict = r.max_tokens;
        params.stop_at_eos = !options_.ignore_eos;
        params.sampler.temperature = r.temperature;
        params.sampler.top_p = r.top_p;
        params.sampler.top_k = r.top_k;
        params.sampler.min_p = r.min_p;
        params.sampler.presence_penalty = r.presence_penalty;
        params.sampler.frequency_penalty = r.frequency_penalty;
        params.sampler.logit_bias = r.logit_bias;
        params.sampler.seed = r.seed ? *r.seed : seed_of(-1);
        std::atomic<bool> stop{false};
        params.cancel = &stop;
        StopStrings stops(r.stop);
        CompletionResult result;
        result.prompt_tokens = static_cast<int>(prompt.size());
        std::vector<TokenLogprob> pending;  // logprobs not yet sent with a piece
        if (r.logprobs) {
            params.on_token = [&](int32_t token, const float* logits, int32_t n_vocab) {
                if (tokenizer_->vocab().is_eog(token)) return;  // not part of the answer
                pending.push_back(token_logprob(*tokenizer_, token, logits, n_vocab, r.top_logprobs));
                result.logprobs.push_back(pending.back());
            };
        }
        bool first = true;
        // Tools offered: text that may be a call is held back until known.
        // Harmony (gpt-oss) is read by its control tokens: they come out as
        // text, and only the final channel is shown.
        const bool harmony = tool_format_ == ToolCallFormat::kHarmony;
        params.render_special = harmony;
        const bool tools = harmony || (!r.tools.empty() && r.tool_choice != ToolChoice::kNone);
        ToolCallStream calls(tool_format_);
        const auto show = [&](const std::string& text) {
            if (text.empty()) return;
            if (first) metrics_.ttft.observe(now_seconds() - start);
            first = false;
            result.text += text;
            if (!emit(text, pending)) stop.store(true);
            pending.clear();
        };
        const auto send = [&](const std::string& text) { show(tools ? calls.push(text) : text); };
        // The slot is held, and its sequence counted as running, until the
        // generation ends however it ends.
        struct SlotHold {
            Server& server;
            int slot;
            SlotHold(Server& s, const std::vector<int32_t>& prompt) : server(s), slot(s.slots_->acquire(prompt)) {
                server.batcher_->begin(slot);
            }
            ~SlotHold() {
                server.batcher_->end(slot);
                server.slots_->release(slot);
            }
        } hold(*this, prompt);
        std::optional<GrammarConstraint> constraint;
        if (r.grammar) {
            std::call_once(pieces_once_, [&] {
                pieces_ = vocabulary_pieces(*tokenizer_, tool_format_ == ToolCallFormat::kHarmony);
            });
            constraint.emplace(r.grammar, pieces_);
            params.constraint = &*constraint;
        }
        if (!drafters_.empty()) {
            params.drafter = drafters_[static_cast<size_t>(hold.slot)].get();
            params.draft_max = draft_max_;
            params.draft_min = draft_min_;
        }
        const GenerationResult g = slots_->cache(hold.slot).generate(
            batcher_->sequence(hold.slot), *tokenizer_, prompt, params, [&](const std::string& piece) {
                send(stops.push(piece));
                if (stops.stopped()) stop.store(true);
            });
        send(stops.flush());
        result.completion_tokens = static_cast<int>(g.tokens.size());
        result.prompt_seconds = g.prompt_seconds;
        result.finish_reason = g.stop_reason == "length" || g.stop_reason == "context" ? "length" : "stop";
        if (tools) {
            ParsedAnswer answer = parse_tool_calls(tool_format_, calls.text(), r.tool_names, seed_of(-1));
            result.reasoning = answer.reasoning;
            if (answer.calls.empty()) {
                show(calls.finish());  // what was held back was text after all
                if (harmony) result.text = answer.content;
            } else {
                result.text = answer.content;
                result.tool_calls = std::move(answer.calls);
                result.finish_reason = "tool_calls";
            }
        }
        metrics_.prompt_tokens += static_cast<uint64_t>(prompt.size());
        metrics_.cached_tokens += static_cast<uint64_t>(prompt.size() - static_cast<size_t>(g.n_evaluated_prompt));
        metrics_.generated_tokens += static_cast<uint64_t>(g.tokens.size());
        return result;
    }

    // A request may name the model by its file name, that name without
    // ".gguf", or an --alias; another name is OpenAI's 404.
    void check_model_name(const std::string& name) const {
        if (name.empty() || name == model_id_) return;
        const std::string stem = model_id_.size() > 5 && model_id_.ends_with(".gguf") ? model_id_.substr(0, model_id_.size() - 5) : "";
        if (name == stem || std::find(options_.aliases.begin(), options_.aliases.end(), name) != options_.aliases.end()) return;
        ApiError e{404, "The model '" + name + "' does not exist: this server serves '" + model_id_ + "'",
                   "invalid_request_error", "model"};
        e.code = "model_not_found";
        throw e;
    }

    // A request read, its model checked, its prompt tokenized, and a place in
    // the queue; the ApiError of whatever is wrong.
    std::optional<ApiError> admit(const std::string& body, bool chat, CompletionRequest& r, std::vector<int32_t>& prompt) {
        try {
            r = parse_completion_request(body, chat, tool_format_);
            check_model_name(r.model);
            prompt = prompt_of(r);
        } catch (const ApiError& e) {
            return e;
        } catch (const Error& e) {  // a template that refuses the conversation
            return ApiError{400, e.what(), "invalid_request_error", "messages"};
        }
        if (waiting_.load() >= options_.queue + options_.n_parallel) {
            return ApiError{503, "the server is busy: too many requests waiting", "server_error", ""};
        }
        return std::nullopt;
    }

    // Ollama's /api/chat (chat) and /api/generate: the same request
    // underneath, the answer as Ollama writes it (streamed as NDJSON unless
    // "stream": false).
    void ollama(const httplib::Request& req, httplib::Response& res, bool chat) {
        ++metrics_.requests;
        const double start = now_seconds();
        const auto refuse = [&](const ApiError& e) {
            ++metrics_.errors;
            res.status = e.status;
            res.set_content(dump_json(ollama_error(e)), "application/json");
        };
        bool stream = true;
        std::string body;
        try {
            body = ollama_to_openai(req.body, chat, &stream);
        } catch (const ApiError& e) {
            return refuse(e);
        }
        CompletionRequest r;
        std::vector<int32_t> prompt;
        const bool as_chat = nlohmann::json::parse(body).contains("messages");  // /api/generate without "raw" is a chat
        if (const auto error = admit(body, as_chat, r, prompt)) {
            return refuse(*error);
        }
        const auto ticket = std::make_shared<QueueTicket>(waiting_);
        const auto finish = [this, chat, start, prompt](const CompletionResult& result) {
            OllamaTimings t;
            t.prompt_tokens = result.prompt_tokens;
            t.generated_tokens = result.completion_tokens;
            t.prompt_seconds = result.prompt_seconds;
            t.total_seconds = now_seconds() - start;
            const std::string reason = result.finish_reason == "length" ? "length" : "stop";
            return ollama_message(chat, model_id_, stream_text_of(result), &result.tool_calls, reason, &t);
        };
        if (!stream) {
            try {
                const CompletionResult result =
                    generate(r, prompt, start, [](const std::string&, const std::vector<TokenLogprob>&) { return true; });
                json last = finish(result);
                if (chat) {
                    last["message"]["content"] = result.text;
                } else {
                    last["response"] = result.text;
                }
                res.set_content(dump_json(last), "application/json");
            } catch (const Error& e) {
                refuse(ApiError{500, e.what(), "server_error", ""});
            }
            metrics_.latency.observe(now_seconds() - start);
            return;
        }
        res.set_chunked_content_provider("application/x-ndjson", [this, r, prompt, chat, start, ticket, finish](
                                                                     size_t, httplib::DataSink& sink) {
            const auto line = [&](const json& j) {
                const std::string text = dump_json(j) + "\n";
                return sink.write(text.data(), text.size());
            };
            try {
                const CompletionResult result =
                    generate(r, prompt, start, [&](const std::string& text, const std::vector<TokenLogprob>&) {
                        return sink.is_writable() && line(ollama_message(chat, model_id_, text, nullptr, "", nullptr));
                    });
                line(finish(result));
            } catch (const Error& e) {
                line(ollama_error(ApiError{500, e.what(), "server_error", ""}));
            }
            sink.done();
            metrics_.latency.observe(now_seconds() - start);
            return true;
        });
    }

    // Anthropic's /v1/messages: the same request underneath, the answer as a
    // message of content blocks, or Anthropic's stream of events.
    void messages(const httplib::Request& req, httplib::Response& res) {
        ++metrics_.requests;
        const double start = now_seconds();
        const auto refuse = [&](const ApiError& e) {
            ++metrics_.errors;
            res.status = e.status;
            res.set_content(dump_json(anthropic_error(e)), "application/json");
        };
        bool stream = false;
        std::string body;
        try {
            body = anthropic_to_openai(req.body, &stream);
        } catch (const ApiError& e) {
            return refuse(e);
        }
        CompletionRequest r;
        std::vector<int32_t> prompt;
        if (const auto error = admit(body, true, r, prompt)) return refuse(*error);
        const auto ticket = std::make_shared<QueueTicket>(waiting_);
        const std::string id = "msg_" + std::to_string(next_id_++);
        if (!stream) {
            try {
                const CompletionResult result =
                    generate(r, prompt, start, [](const std::string&, const std::vector<TokenLogprob>&) { return true; });
                res.set_content(dump_json(anthropic_message(id, model_id_, result)), "application/json");
            } catch (const Error& e) {
                refuse(ApiError{500, e.what(), "server_error", ""});
            }
            metrics_.latency.observe(now_seconds() - start);
            return;
        }
        res.set_chunked_content_provider("text/event-stream", [this, r, prompt, id, start, ticket](size_t,
                                                                                                  httplib::DataSink& sink) {
            AnthropicStream events(id, model_id_, static_cast<int>(prompt.size()));
            const auto send = [&](const std::vector<AnthropicStream::Event>& list) {
                bool ok = true;
                for (const auto& [name, data] : list) {
                    const std::string text = "event: " + name + "\ndata: " + dump_json(data) + "\n\n";
                    ok = sink.write(text.data(), text.size()) && ok;
                }
                return ok;
            };
            send(events.start());
            try {
                const CompletionResult result =
                    generate(r, prompt, start, [&](const std::string& text, const std::vector<TokenLogprob>&) {
                        return sink.is_writable() && send(events.text(text));
                    });
                send(events.finish(result));
            } catch (const Error& e) {
                send({{"error", anthropic_error(ApiError{500, e.what(), "server_error", ""})}});
            }
            sink.done();
            metrics_.latency.observe(now_seconds() - start);
            return true;
        });
    }

    // The model as /api/tags lists it.
    json ollama_model() const {
        const std::string family = model_.file().find_string("general.architecture").value_or("");
        return {{"name", model_id_},
                {"model", model_id_},
                {"modified_at", "1970-01-01T00:00:00Z"},
                {"size", model_.file().file_size()},
                {"digest", model_.file().fingerprint_hex()},
                {"details", {{"parent_model", ""}, {"format", "gguf"}, {"family", family}, {"families", json::array({family})},
                             {"parameter_size", ""},
                             {"quantization_level", ""}}}};
    }

    // The last streamed line carries no text (it was streamed already).
    static std::string stream_text_of(const CompletionResult&) { return {}; }

    void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
        ++metrics_.requests;
        const double start = now_seconds();
        CompletionRequest r;
        std::vector<int32_t> prompt;
        if (const auto error = admit(req.body, chat, r, prompt)) return fail(res, *error);
        // Counts this request as waiting or running until the last copy of
        // the ticket goes (with the stream's provider, however it ends).
        const auto ticket = std::make_shared<QueueTicket>(waiting_);
        const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
        const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
        if (!r.stream) {
            try {
                const CompletionResult result =
                    generate(r, prompt, start, [](const std::string&, const std::vector<TokenLogprob>&) { return true; });
                res.set_content(dump_json(completion_json(r, result, id, model_id_, created)), "application/json");
            } catch (const Error& e) {
                fail(res, ApiError{500, e.what(), "server_error", ""});
            }
            metrics_.latency.observe(now_seconds() - start);
            return;
        }
        res.set_chunked_content_provider("text/event-stream", [this, r, prompt, id, start, created, ticket](
                                                                  size_t, httplib::DataSink& sink) {
            const auto event = [&](const json& j) {
                const std::string line = "data: " + dump_json(j) + "\n\n";
                return sink.write(line.data(), line.size());
            };
            try {
                event(chunk_json(r, id, model_id_, created, "", "", true));
                const CompletionResult result =
                    generate(r, prompt, start, [&](const std::string& text, const std::vector<TokenLogprob>& logprobs) {
                        return sink.is_writable() &&
                               event(chunk_json(r, id, model_id_, created, text, "", false, &logprobs));
                    });
                for (const json& chunk : tool_call_chunks_json(id, model_id_, created, result.tool_calls)) event(chunk);
                event(chunk_json(r, id, model_id_, created, "", result.finish_reason, false));
                if (r.include_usage) {
                    json usage = chunk_json(r, id, model_id_, created, "", "", false);
                    usage["choices"] = json::array();
                    usage["usage"] = usage_json(result);
                    event(usage);
                }
            } catch (const Error& e) {
                event(ApiError{500, e.what(), "server_error", ""}.body());
            }
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
            metrics_.latency.observe(now_seconds() - start);
            return true;
        });
    }
};

}  // namespace

namespace {
std::string ignored_fields_help() {
    std::string out;
    for (const auto& [field, reason] : ignored_request_fields()) out += (out.empty() ? "" : "; ") + field + " (" + reason + ")";
    return out;
}
}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "serve",
        "OpenAI-compatible HTTP server (chat and completions) on any plan. A chat message's content is text: only "
        "the control tokens the chat template writes are control tokens. /v1/completions takes its prompt raw: "
        "control tokens written in it (<|im_start|>, <s>) become their ids, as llama-server's /completion does. "
        "response_format (json_object, json_schema) and llama.cpp's 'grammar' (GBNF) hold the output to a "
        "grammar. A request field serve does not implement is a 400 naming it, except these, accepted and "
        "ignored: " + ignored_fields_help());
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled models/stories260K.gguf)");
    cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", o->port, "Port (0: any free one; the first line printed says which)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health");
    add_conversation_flags(cmd, o->chat_template, o->n_ctx, o->n_batch, o->n_threads);
    cmd->add_option("-P,--parallel", o->n_parallel,
                    "Slots: requests generated at once, each with its own KV cache of -c tokens, their tokens batched "
                    "through the model together")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    cmd->add_option("--prefill-chunk", o->prefill_chunk,
                    "Prompt tokens a batch takes while other slots decode (smaller: shorter stalls for them)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--queue", o->queue, "Requests that may wait for a slot; more are answered 503")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    cmd->add_option("--max-body", o->max_body, "Largest request body in bytes (larger: 413)")->capture_default_str();
    cmd->add_option("--alias", o->aliases,
                    "Another name requests may give as 'model' (besides the file's name, with or without .gguf; "
                    "others get a 404)");
    cmd->add_flag("--ignore-eos", o->ignore_eos,
                  "Keep generating past end-of-text tokens, until max_tokens or the context is full (as llama-server's)");
    add_parallel_flags(cmd, o->parallel);
    add_attention_flags(cmd, o->attention);
    add_draft_flags(cmd, o->draft);
    cmd->callback([o] { Server(*o).run(); });
}

}  // namespace tessera
