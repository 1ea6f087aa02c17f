#include "serve/openai_api.h"

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_grammar.h"
#include "model/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessera {

namespace {

using nlohmann::json;

float number_in(const json& body, const char* key, float fallback, float lo, float hi) {
    if (!body.contains(key) || body[key].is_null()) return fallback;
    if (!body[key].is_number()) throw bad_request(key, std::string("'") + key + "' must be a number");
    const double v = body[key].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
        throw bad_request(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    }
    return static_cast<float>(v);
}

// Message content is a string or a list of parts, of which text parts count.
template <typename Json>
std::string content_text(const Json& content, size_t index) {
    if (content.is_string()) return content.template get<std::string>();
    if (content.is_null()) return {};
    if (content.is_array()) {
        std::string text;
        for (const Json& part : content) {
            const bool text_part = part.is_object() && part.contains("type") && part["type"] == "text" &&
                                   part.contains("text") && part["text"].is_string();
            if (!text_part) {
                throw bad_request("messages", "message " + std::to_string(index) + ": only text content parts are supported");
            }
            text += part["text"].template get<std::string>();
        }
        return text;
    }
    throw bad_request("messages", "message " + std::to_string(index) + ": 'content' must be a string or a list of text parts");
}

// A grammar read and its start matched, so what would fail at the first
// token (too ambiguous a start) fails here as the request's error.
std::shared_ptr<const Grammar> checked_grammar(const std::string& gbnf) {
    auto grammar = std::make_shared<const Grammar>(parse_gbnf(gbnf));
    GrammarMatcher(grammar).start();
    return grammar;
}

// response_format or grammar, as the grammar the output must match.
// `text` is the body again: a schema's properties are read in their written
// order (the output follows it), which the parsed body's sorted keys lost.
std::shared_ptr<const Grammar> output_grammar(const json& body, const std::string& text) {
    const bool has_format = body.contains("response_format") && !body["response_format"].is_null();
    const bool has_grammar = body.contains("grammar") && !body["grammar"].is_null();
    const bool has_schema = body.contains("json_schema") && !body["json_schema"].is_null();
    if (has_format + has_grammar + has_schema > 1) {
        throw bad_request("grammar", "give one of 'response_format', 'grammar' and 'json_schema'");
    }
    if (has_schema) {  // llama.cpp's extension: the schema alone
        if (!body["json_schema"].is_object() && !body["json_schema"].is_boolean()) {
            throw bad_request("json_schema", "'json_schema' must be a JSON schema object");
        }
        try {
            const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
            return checked_grammar(json_schema_to_gbnf(ordered["json_schema"]));
        } catch (const GrammarError& e) {
            throw bad_request("json_schema", e.what());
        }
    }
    std::string gbnf;
    std::string param = "response_format";
    try {
        if (has_grammar) {
            param = "grammar";
            if (!body["grammar"].is_string()) throw bad_request("grammar", "'grammar' must be a string of GBNF rules");
            gbnf = body["grammar"].get<std::string>();
        } else if (has_format) {
            const json& format = body["response_format"];
            if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
                throw bad_request(param, "'response_format' must be an object with a string 'type'");
            }
            const std::string type = format["type"].get<std::string>();
            if (type == "text") return nullptr;
            if (type == "json_object") {
                gbnf = json_object_gbnf();
            } else if (type == "json_schema") {
                if (!format.contains("json_schema") || !format["json_schema"].is_object()) {
                    throw bad_request(param, "'response_format.json_schema' must be an object with a 'schema'");
                }
                const json& spec = format["json_schema"];
                if (spec.contains("strict") && !spec["strict"].is_null() && !spec["strict"].is_boolean()) {
                    throw bad_request(param, "'response_format.json_schema.strict' must be a boolean");
                }
                if (spec.contains("name") && !spec["name"].is_string()) {
                    throw bad_request(param, "'response_format.json_schema.name' must be a string");
                }
                // Strict or not, the output is held to the schema: a
                // grammar cannot follow a schema only partly.
                const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
                const nlohmann::ordered_json& in_order = ordered["response_format"]["json_schema"];
                gbnf = json_schema_to_gbnf(in_order.contains("schema") ? in_order["schema"] : nlohmann::ordered_json::object());
            } else {
                throw bad_request(param, "'response_format.type' must be text, json_object or json_schema");
            }
        } else {
            return nullptr;
        }
        return checked_grammar(gbnf);
    } catch (const GrammarError& e) {
        throw bad_request(param, e.what());
    }
}

using ordered_json = nlohmann::ordered_json;

// A call's arguments: a JSON object, or (as OpenAI sends them) its text.
ordered_json call_arguments(const ordered_json& arguments, const std::string& where) {
    if (arguments.is_object()) return arguments;
    if (arguments.is_string()) {
        try {
            ordered_json parsed = ordered_json::parse(arguments.get<std::string>());
            if (parsed.is_object()) return parsed;
        } catch (const nlohmann::json::exception&) {
        }
    }
    throw bad_request("messages", where + ": 'arguments' must be a JSON object or its text");
}

// The conversation as the template reads it: role and text content, an
// assistant's tool_calls (arguments as objects, as Hugging Face's templates
// expect), a tool result's tool_call_id and the name of the function it
// answers (taken from the call when the client leaves it out).
ordered_json read_messages(const ordered_json& messages) {
    ordered_json out = ordered_json::array();
    std::map<std::string, std::string> call_names;  // id -> function
    for (size_t i = 0; i < messages.size(); ++i) {
        const ordered_json& m = messages[i];
        const std::string where = "message " + std::to_string(i);
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) throw bad_request("messages", where + " needs a string 'role'");
        const std::string role = m["role"].get<std::string>();
        ordered_json message = {{"role", role}, {"content", content_text(m.value("content", ordered_json()), i)}};
        if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
            if (role != "assistant") throw bad_request("messages", where + ": only an assistant message has 'tool_calls'");
            if (!m["tool_calls"].is_array()) throw bad_request("messages", where + ": 'tool_calls' must be an array");
            ordered_json calls = ordered_json::array();
            for (size_t c = 0; c < m["tool_calls"].size(); ++c) {
                const ordered_json& call = m["tool_calls"][c];
                const std::string at = where + ", tool call " + std::to_string(c);
                if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
                    !call["function"].contains("name") || !call["function"]["name"].is_string()) {
                    throw bad_request("messages", at + " needs a 'function' with a string 'name'");
                }
                if (call.contains("id") && !call["id"].is_string()) throw bad_request("messages", at + ": 'id' must be a string");
                const std::string id = call.value("id", std::string());
                const std::string name = call["function"]["name"].get<std::string>();
                const ordered_json arguments =
                    call_arguments(call["function"].value("arguments", ordered_json(ordered_json::object())), at);
                call_names[id] = name;
                calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
            }
            message["tool_calls"] = calls;
        }
        if (role == "tool") {
            if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()) {
                throw bad_request("messages", where + ": a tool message needs a string 'tool_call_id'");
            }
            const std::string id = m["tool_call_id"].get<std::string>();
            message["tool_call_id"] = id;
            if (m.contains("name") && m["name"].is_string()) {
                message["name"] = m["name"];
            } else if (call_names.count(id) != 0) {
                message["name"] = call_names[id];
            }
            // Templates print the content after the name (Qwen: in <tool_response>).
            ordered_json content = message["content"];
            message.erase("content");
            message["content"] = content;
        }
        out.push_back(std::move(message));
    }
    return out;
}

bool is_function_name(const std::string& name) {
    return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

// tools, tool_choice, parallel_tool_calls.
void read_tools(const ordered_json& body, CompletionRequest& r) {
    if (body.contains("tools") && !body["tools"].is_null()) {
        const ordered_json& tools = body["tools"];
        if (!tools.is_array()) throw bad_request("tools", "'tools' must be an array");
        if (tools.size() > kMaxTools) {
            throw bad_request("tools", "'tools' lists " + std::to_string(tools.size()) + " functions; at most " +
                                   std::to_string(kMaxTools) + " are accepted");
        }
        for (size_t i = 0; i < tools.size(); ++i) {
            const ordered_json& t = tools[i];
            const std::string where = "tool " + std::to_string(i);
            if (!t.is_object() || t.value("type", std::string()) != "function" || !t.contains("function") ||
                !t["function"].is_object()) {
                throw bad_request("tools", where + " must be {\"type\": \"function\", \"function\": {...}}");
            }
            const ordered_json& f = t["function"];
            if (!f.contains("name") || !f["name"].is_string() || !is_function_name(f["name"].get<std::string>())) {
                throw bad_request("tools", where + ": 'name' must be 1 to 64 letters, digits, '_' or '-'");
            }
            const std::string name = f["name"].get<std::string>();
            if (std::find(r.tool_names.begin(), r.tool_names.end(), name) != r.tool_names.end()) {
                throw bad_request("tools", where + ": a second function named '" + name + "'");
            }
            if (f.contains("parameters") && !f["parameters"].is_object()) {
                throw bad_request("tools", where + ": 'parameters' must be a JSON schema object");
            }
            if (f.contains("description") && !f["description"].is_string()) {
                throw bad_request("tools", where + ": 'description' must be a string");
            }
            r.tool_names.push_back(name);
        }
        r.tools = tools;
    }
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        const ordered_json& choice = body["tool_choice"];
        if (r.tools.empty()) throw bad_request("tool_choice", "'tool_choice' needs 'tools'");
        if (choice == "none") {
            r.tool_choice = ToolChoice::kNone;
        } else if (choice == "auto") {
            r.tool_choice = ToolChoice::kAuto;
        } else if (choice == "required") {
            r.tool_choice = ToolChoice::kRequired;
        } else if (choice.is_object() && choice.value("type", std::string()) == "function" && choice.contains("function") &&
                   choice["function"].is_object() && choice["function"].contains("name") &&
                   choice["function"]["name"].is_string()) {
            r.tool_choice = ToolChoice::kNamed;
            r.tool_name = choice["function"]["name"].get<std::string>();
            if (std::find(r.tool_names.begin(), r.tool_names.end(), r.tool_name) == r.tool_names.end()) {
                throw bad_request("tool_choice", "'tool_choice' names '" + r.tool_name + "', which is not among the tools");
            }
        } else {
            throw bad_request("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                                     "\"function\": {\"name\": ...}}");
        }
    }
    if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
        if (!body["parallel_tool_calls"].is_boolean()) throw bad_request("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        r.parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
    }
}

}  // namespace

json ApiError::body() const {
    return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                       {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

nlohmann::ordered_json parse_body_object(const std::string& text) {
    nlohmann::ordered_json body;
    try {
        body = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw bad_request("", std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw bad_request("", "the body must be a JSON object");
    return body;
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
        "frequency_penalty", "logit_bias", "stream", "stream_options", "logprobs", "n", "response_format", "grammar", "json_schema",
        "max_completion_tokens"};
    static const std::vector<std::string> chat_tools = {"tools", "tool_choice", "parallel_tool_calls"};
    static const std::vector<std::string> chat_only = {"messages", "top_logprobs"};
    static const std::vector<std::string> legacy_functions = {"functions", "function_call"};
    for (const auto& item : body.items()) {
        const std::string key = item.key();  // a lambda below needs it (clang refuses a captured binding)
        const auto in = [&](const std::vector<std::string>& list) {
            return std::find(list.begin(), list.end(), key) != list.end();
        };
        if (in(both) || (chat && (in(chat_only) || in(chat_tools))) || (!chat && key == "prompt")) continue;
        if (std::any_of(ignored_request_fields().begin(), ignored_request_fields().end(),
                        [&](const auto& f) { return f.first == key; })) {
            continue;
        }
        if (in(legacy_functions)) throw bad_request(key, "'" + key + "' is OpenAI's deprecated form: give 'tools' and 'tool_choice'");
        if (in(chat_tools)) throw bad_request(key, "'" + key + "' belongs to /v1/chat/completions");
        throw bad_request(key, "'" + key + "' is not a field this server implements" +
                           std::string(chat ? "" : " on /v1/completions"));
    }
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& text, bool chat, ToolCallFormat tool_format) {
    json body;
    try {
        body = json::parse(text);
    } catch (const json::exception& e) {
        throw bad_request("", std::string("the body is not valid JSON: ") + e.what());
    }
    if (!body.is_object()) throw bad_request("", "the body must be a JSON object");
    refuse_unknown_fields(body, chat);
    CompletionRequest r;
    r.chat = chat;
    if (body.contains("model") && !body["model"].is_null()) {
        if (!body["model"].is_string()) throw bad_request("model", "'model' must be a string");
        r.model = body["model"].get<std::string>();
    }
    if (chat) {
        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
            throw bad_request("messages", "'messages' must be a non-empty array");
        }
        // Read again in written order: tool schemas and call arguments are
        // printed by the template (tojson) in the order the client wrote.
        const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
        r.messages = read_messages(ordered["messages"]);
        read_tools(ordered, r);
    } else {
        if (!body.contains("prompt") || !body["prompt"].is_string()) throw bad_request("prompt", "'prompt' must be a string");
        r.prompt = body["prompt"].get<std::string>();
    }
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
        if (body.contains(key) && !body[key].is_null()) {
            if (!body[key].is_number_integer() || body[key].get<int64_t>() < 1 || body[key].get<int64_t>() > (1 << 24)) {
                throw bad_request(key, std::string("'") + key + "' must be a positive integer");
            }
            r.max_tokens = static_cast<int>(body[key].get<int64_t>());
        }
    }
    r.temperature = number_in(body, "temperature", 1.0f, 0.0f, 2.0f);
    r.top_p = number_in(body, "top_p", 1.0f, 0.0f, 1.0f);
    r.min_p = number_in(body, "min_p", 0.0f, 0.0f, 1.0f);
    if (body.contains("top_k") && !body["top_k"].is_null()) {
        if (!body["top_k"].is_number_integer() || body["top_k"].get<int64_t>() < 0 || body["top_k"].get<int64_t>() > (1 << 24)) {
            throw bad_request("top_k", "'top_k' must be an integer, 0 or more");
        }
        r.top_k = static_cast<int>(body["top_k"].get<int64_t>());
    }
    r.presence_penalty = number_in(body, "presence_penalty", 0.0f, -2.0f, 2.0f);
    r.frequency_penalty = number_in(body, "frequency_penalty", 0.0f, -2.0f, 2.0f);
    if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
        const json& bias = body["logit_bias"];
        if (!bias.is_object()) throw bad_request("logit_bias", "'logit_bias' must map token ids to numbers");
        for (const auto& [key, value] : bias.items()) {
            const bool id = !key.empty() && key.size() <= 9 &&
                            std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!id || !value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
                throw bad_request("logit_bias", "'logit_bias' maps token ids (strings of digits) to numbers in [-100, 100]");
            }
            r.logit_bias.emplace_back(static_cast<int32_t>(std::stol(key)), value.get<float>());
        }
    }
    if (body.contains("seed") && !body["seed"].is_null()) {
        if (!body["seed"].is_number_integer()) throw bad_request("seed", "'seed' must be an integer");
        r.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
        const json& stop = body["stop"];
        if (stop.is_string()) {
            r.stop.push_back(stop.get<std::string>());
        } else if (stop.is_array() && stop.size() <= 4) {
            for (const json& s : stop) {
                if (!s.is_string()) throw bad_request("stop", "'stop' must be a string or up to 4 strings");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            throw bad_request("stop", "'stop' must be a string or up to 4 strings");
        }
    }
    if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) throw bad_request("n", "only n = 1 is supported");
    if (body.contains("stream") && !body["stream"].is_null()) {
        if (!body["stream"].is_boolean()) throw bad_request("stream", "'stream' must be a boolean");
        r.stream = body["stream"].get<bool>();
    }
    if (body.contains("logprobs") && !body["logprobs"].is_null()) {
        const json& lp = body["logprobs"];
        if (chat) {
            if (!lp.is_boolean()) throw bad_request("logprobs", "'logprobs' must be a boolean");
            r.logprobs = lp.get<bool>();
        } else {
            if (!lp.is_number_integer() || lp.get<int64_t>() < 0 || lp.get<int64_t>() > 5) {
                throw bad_request("logprobs", "'logprobs' must be an integer from 0 to 5");
            }
            r.logprobs = true;
            r.top_logprobs = static_cast<int>(lp.get<int64_t>());
        }
    }
    if (chat && body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
        const json& top = body["top_logprobs"];
        if (!top.is_number_integer() || top.get<int64_t>() < 0 || top.get<int64_t>() > 20) {
            throw bad_request("top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
        }
        if (!r.logprobs) throw bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.top_logprobs = static_cast<int>(top.get<int64_t>());
    }
    r.grammar = output_grammar(body, text);
    if (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed) {
        if (r.grammar) throw bad_request("tool_choice", "a required tool call and 'response_format' or 'grammar' exclude each other");
        try {
            r.grammar = checked_grammar(tool_call_grammar(tool_format, r.tools, r.tool_name, r.parallel_tool_calls));
        } catch (const GrammarError& e) {
            throw bad_request("tools", e.what());
        }
    }
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
        const json& options = body["stream_options"];
        if (!options.is_object()) throw bad_request("stream_options", "'stream_options' must be an object");
        if (options.contains("include_usage") && !options["include_usage"].is_null()) {
            if (!options["include_usage"].is_boolean()) {
                throw bad_request("stream_options", "'stream_options.include_usage' must be a boolean");
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
        if (!r.reasoning.empty()) choice["message"]["reasoning_content"] = r.reasoning;
        if (!r.tool_calls.empty()) {
            if (r.text.empty()) choice["message"]["content"] = nullptr;
            json calls = json::array();
            for (const ToolCall& c : r.tool_calls) {
                calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
            }
            choice["message"]["tool_calls"] = calls;
        }
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

std::vector<json> tool_call_chunks_json(const std::string& id, const std::string& model, int64_t created,
                                        const std::vector<ToolCall>& calls) {
    std::vector<json> chunks;
    const auto chunk = [&](const json& delta) {
        return json{{"id", id},
                    {"object", "chat.completion.chunk"},
                    {"created", created},
                    {"model", model},
                    {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}}})}};
    };
    for (size_t i = 0; i < calls.size(); ++i) {
        // As OpenAI streams a call: its id, type and name with empty
        // arguments, then the arguments.
        chunks.push_back(chunk({{"tool_calls", json::array({{{"index", i}, {"id", calls[i].id}, {"type", "function"},
                                                            {"function", {{"name", calls[i].name}, {"arguments", ""}}}}})}}));
        chunks.push_back(chunk({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", calls[i].arguments}}}}})}}));
    }
    return chunks;
}

}  // namespace tessera
