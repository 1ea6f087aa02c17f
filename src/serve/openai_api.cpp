#include "serve/openai_api.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_grammar.h"
#include "model/tokenizer.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

using nlohmann::json;

ApiError bad(const std::string& param, const std::string& message) { return ApiError{400, message, "invalid_request_error", param}; }

float number_in(const json& body, const char* key, float fallback, float lo, float hi) {
    if (!body.contains(key) || body[key].is_null()) return fallback;
    if (!body[key].is_number()) throw bad(key, std::string("'") + key + "' must be a number");
    const double v = body[key].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
        throw bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    }
    return static_cast<float>(v);
}

// Message content is a string or a list of parts, of which text parts count.
std::string content_text(const json& content, size_t index) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return {};
    if (content.is_array()) {
        std::string text;
        for (const json& part : content) {
            const bool text_part = part.is_object() && part.contains("type") && part["type"] == "text" &&
                                   part.contains("text") && part["text"].is_string();
            if (!text_part) {
                throw bad("messages", "message " + std::to_string(index) + ": only text content parts are supported");
            }
            text += part["text"].get<std::string>();
        }
        return text;
    }
    throw bad("messages", "message " + std::to_string(index) + ": 'content' must be a string or a list of text parts");
}

// response_format or grammar, as the grammar the output must match.
// `text` is the body again: a schema's properties are read in their written
// order (the output follows it), which the parsed body's sorted keys lost.
std::shared_ptr<const Grammar> output_grammar(const json& body, const std::string& text) {
    const bool has_format = body.contains("response_format") && !body["response_format"].is_null();
    const bool has_grammar = body.contains("grammar") && !body["grammar"].is_null();
    if (has_format && has_grammar) throw bad("grammar", "give 'response_format' or 'grammar', not both");
    std::string gbnf;
    std::string param = "response_format";
    try {
        if (has_grammar) {
            param = "grammar";
            if (!body["grammar"].is_string()) throw bad("grammar", "'grammar' must be a string of GBNF rules");
            gbnf = body["grammar"].get<std::string>();
        } else if (has_format) {
            const json& format = body["response_format"];
            if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
                throw bad(param, "'response_format' must be an object with a string 'type'");
            }
            const std::string type = format["type"].get<std::string>();
            if (type == "text") return nullptr;
            if (type == "json_object") {
                gbnf = json_object_gbnf();
            } else if (type == "json_schema") {
                if (!format.contains("json_schema") || !format["json_schema"].is_object()) {
                    throw bad(param, "'response_format.json_schema' must be an object with a 'schema'");
                }
                const json& spec = format["json_schema"];
                if (spec.contains("strict") && !spec["strict"].is_null() && !spec["strict"].is_boolean()) {
                    throw bad(param, "'response_format.json_schema.strict' must be a boolean");
                }
                if (spec.contains("name") && !spec["name"].is_string()) {
                    throw bad(param, "'response_format.json_schema.name' must be a string");
                }
                // Strict or not, the output is held to the schema: a
                // grammar cannot follow a schema only partly.
                const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
                const nlohmann::ordered_json& in_order = ordered["response_format"]["json_schema"];
                gbnf = json_schema_to_gbnf(in_order.contains("schema") ? in_order["schema"] : nlohmann::ordered_json::object());
            } else {
                throw bad(param, "'response_format.type' must be text, json_object or json_schema");
            }
        } else {
            return nullptr;
        }
        return std::make_shared<const Grammar>(parse_gbnf(gbnf));
    } catch (const GrammarError& e) {
        throw bad(param, e.what());
    }
}

}  // namespace

json ApiError::body() const {
    return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                       {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

const std::vector<std::pair<std::string, std::string>>& ignored_request_fields() {
    static const std::vector<std::pair<std::string, std::string>> fields = {
        {"user", "an end user's id for the provider's abuse monitoring: no accounts here"},
        {"store", "OpenAI's stored completions: nothing is stored"},
        {"metadata", "tags for stored completions: nothing is stored"},
        {"service_tier", "one tier only"},
    };
    return fields;
}

namespace {

// Every field a request may carry; any other is refused by name, so a
// client never gets an answer that quietly left out what it asked for.
void refuse_unknown_fields(const json& body, bool chat) {
    static const std::vector<std::string> both = {
        "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
        "frequency_penalty", "logit_bias", "stream", "stream_options", "logprobs", "n", "response_format", "grammar",
        "max_completion_tokens"};
    static const std::vector<std::string> chat_only = {"messages", "top_logprobs"};
    static const std::vector<std::string> tool_fields = {"tools", "tool_choice", "parallel_tool_calls", "functions",
                                                         "function_call"};
    for (const auto& [key, value] : body.items()) {
        const auto in = [&](const std::vector<std::string>& list) {
            return std::find(list.begin(), list.end(), key) != list.end();
        };
        if (in(both) || (chat && in(chat_only)) || (!chat && key == "prompt")) continue;
        if (std::any_of(ignored_request_fields().begin(), ignored_request_fields().end(),
                        [&](const auto& f) { return f.first == key; })) {
            continue;
        }
        if (in(tool_fields)) throw bad(key, "'" + key + "': tool calls are not supported by this server yet");
        throw bad(key, "'" + key + "' is not a field this server implements" +
                           std::string(chat ? "" : " on /v1/completions"));
    }
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& text, bool chat) {
    json body;
    try {
        body = json::parse(text);
    } catch (const json::exception& e) {
        throw bad("", std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw bad("", "the body must be a JSON object");
    refuse_unknown_fields(body, chat);
    CompletionRequest r;
    r.chat = chat;
    if (body.contains("model") && !body["model"].is_null()) {
        if (!body["model"].is_string()) throw bad("model", "'model' must be a string");
        r.model = body["model"].get<std::string>();
    }
    if (chat) {
        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
            throw bad("messages", "'messages' must be a non-empty array");
        }
        r.messages = nlohmann::ordered_json::array();
        size_t i = 0;
        for (const json& m : body["messages"]) {
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
                throw bad("messages", "message " + std::to_string(i) + " needs a string 'role'");
            }
            r.messages.push_back({{"role", m["role"].get<std::string>()}, {"content", content_text(m.value("content", json()), i)}});
            ++i;
        }
    } else {
        if (!body.contains("prompt") || !body["prompt"].is_string()) throw bad("prompt", "'prompt' must be a string");
        r.prompt = body["prompt"].get<std::string>();
    }
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
        if (body.contains(key) && !body[key].is_null()) {
            if (!body[key].is_number_integer() || body[key].get<int64_t>() < 1 || body[key].get<int64_t>() > (1 << 24)) {
                throw bad(key, std::string("'") + key + "' must be a positive integer");
            }
            r.max_tokens = static_cast<int>(body[key].get<int64_t>());
        }
    }
    r.temperature = number_in(body, "temperature", 1.0f, 0.0f, 2.0f);
    r.top_p = number_in(body, "top_p", 1.0f, 0.0f, 1.0f);
    r.min_p = number_in(body, "min_p", 0.0f, 0.0f, 1.0f);
    if (body.contains("top_k") && !body["top_k"].is_null()) {
        if (!body["top_k"].is_number_integer() || body["top_k"].get<int64_t>() < 0 || body["top_k"].get<int64_t>() > (1 << 24)) {
            throw bad("top_k", "'top_k' must be an integer, 0 or more");
        }
        r.top_k = static_cast<int>(body["top_k"].get<int64_t>());
    }
    r.presence_penalty = number_in(body, "presence_penalty", 0.0f, -2.0f, 2.0f);
    r.frequency_penalty = number_in(body, "frequency_penalty", 0.0f, -2.0f, 2.0f);
    if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
        const json& bias = body["logit_bias"];
        if (!bias.is_object()) throw bad("logit_bias", "'logit_bias' must map token ids to numbers");
        for (const auto& [key, value] : bias.items()) {
            const bool id = !key.empty() && key.size() <= 9 &&
                            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!id || !value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
                throw bad("logit_bias", "'logit_bias' maps token ids (strings of digits) to numbers in [-100, 100]");
            }
            r.logit_bias.emplace_back(static_cast<int32_t>(std::stol(key)), value.get<float>());
        }
    }
    if (body.contains("seed") && !body["seed"].is_null()) {
        if (!body["seed"].is_number_integer()) throw bad("seed", "'seed' must be an integer");
        r.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
        const json& stop = body["stop"];
        if (stop.is_string()) {
            r.stop.push_back(stop.get<std::string>());
        } else if (stop.is_array() && stop.size() <= 4) {
            for (const json& s : stop) {
                if (!s.is_string()) throw bad("stop", "'stop' must be a string or up to 4 strings");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            throw bad("stop", "'stop' must be a string or up to 4 strings");
        }
    }
    if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) throw bad("n", "only n = 1 is supported");
    if (body.contains("stream") && !body["stream"].is_null()) {
        if (!body["stream"].is_boolean()) throw bad("stream", "'stream' must be a boolean");
        r.stream = body["stream"].get<bool>();
    }
    if (body.contains("logprobs") && !body["logprobs"].is_null()) {
        const json& lp = body["logprobs"];
        if (chat) {
            if (!lp.is_boolean()) throw bad("logprobs", "'logprobs' must be a boolean");
            r.logprobs = lp.get<bool>();
        } else {
            if (!lp.is_number_integer() || lp.get<int64_t>() < 0 || lp.get<int64_t>() > 5) {
                throw bad("logprobs", "'logprobs' must be an integer from 0 to 5");
            }
            r.logprobs = true;
            r.top_logprobs = static_cast<int>(lp.get<int64_t>());
        }
    }
    if (chat && body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
        const json& top = body["top_logprobs"];
        if (!top.is_number_integer() || top.get<int64_t>() < 0 || top.get<int64_t>() > 20) {
            throw bad("top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
        }
        if (!r.logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.top_logprobs = static_cast<int>(top.get<int64_t>());
    }
    r.grammar = output_grammar(body, text);
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
        const json& options = body["stream_options"];
        if (!options.is_object()) throw bad("stream_options", "'stream_options' must be an object");
        if (options.contains("include_usage") && !options["include_usage"].is_null()) {
            if (!options["include_usage"].is_boolean()) {
                throw bad("stream_options", "'stream_options.include_usage' must be a boolean");
            }
            r.include_usage = options["include_usage"].get<bool>();
        }
    }
    return r;
}

TokenLogprob token_logprob(const Tokenizer& tokenizer, int32_t token, const float* logits, int32_t n_vocab, int top) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
    const float log_z = max + static_cast<float>(std::log(sum));
    TokenLogprob t;
    t.token = tokenizer.token_to_piece(token);
    t.logprob = logits[token] - log_z;
    if (top > 0) {
        std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
        for (int32_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = i;
        const auto k = std::min<size_t>(static_cast<size_t>(top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (size_t i = 0; i < k; ++i) t.top.emplace_back(tokenizer.token_to_piece(ids[i]), logits[ids[i]] - log_z);
    }
    return t;
}

namespace {
json bytes_of(const std::string& s) {
    json b = json::array();
    for (const char c : s) b.push_back(static_cast<uint8_t>(c));
    return b;
}
}  // namespace

json logprobs_json(bool chat, const std::vector<TokenLogprob>& entries) {
    if (chat) {
        json content = json::array();
        for (const TokenLogprob& t : entries) {
            json top = json::array();
            for (const auto& [token, logprob] : t.top) {
                top.push_back({{"token", token}, {"logprob", logprob}, {"bytes", bytes_of(token)}});
            }
            content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)},
                               {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top = json::array();
    for (const TokenLogprob& t : entries) {
        tokens.push_back(t.token);
        token_logprobs.push_back(t.logprob);
        json alternatives = json::object();
        for (const auto& [token, logprob] : t.top) alternatives[token] = logprob;
        top.push_back(alternatives);
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}};
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const CompletionResult& r) {
    return {{"prompt_tokens", r.prompt_tokens}, {"completion_tokens", r.completion_tokens},
            {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

json completion_json(const CompletionRequest& req, const CompletionResult& r, const std::string& id,
                     const std::string& model, int64_t created) {
    json choice = {{"index", 0}, {"finish_reason", r.finish_reason},
                   {"logprobs", req.logprobs ? logprobs_json(req.chat, r.logprobs) : json(nullptr)}};
    if (req.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    } else {
        choice["text"] = r.text;
    }
    return {{"id", id},
            {"object", req.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array({choice})},
            {"usage", usage_json(r)}};
}

json chunk_json(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created,
                const std::string& text, const std::string& finish_reason, bool first,
                const std::vector<TokenLogprob>* logprobs) {
    json choice = {{"index", 0}, {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)},
                   {"logprobs", logprobs != nullptr && req.logprobs ? logprobs_json(req.chat, *logprobs) : json(nullptr)}};
    if (req.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || first) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
    }
    return {{"id", id},
            {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array({choice})}};
}

}  // namespace tessera
