#include "serve/anthropic_api.h"

#include <algorithm>

namespace tessera {

namespace {

using ordered_json = nlohmann::ordered_json;

// A content that is a string or text blocks, as one text.
std::string block_text(const ordered_json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return {};
    if (!content.is_array()) throw bad_request("messages", where + ": 'content' must be a string or an array of blocks");
    std::string text;
    for (const ordered_json& b : content) {
        if (!b.is_object() || b.value("type", std::string()) != "text" || !b.contains("text") || !b["text"].is_string()) {
            throw bad_request("messages", where + ": only text blocks are supported here");
        }
        text += b["text"].get<std::string>();
    }
    return text;
}

// One Anthropic message as OpenAI messages: an assistant's tool_use blocks
// become its tool_calls; a user's tool_result blocks become tool messages
// (before its text, if any).
void add_messages(const ordered_json& m, size_t i, ordered_json& out) {
    const std::string where = "message " + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || !(m["role"] == "user" || m["role"] == "assistant")) {
        throw bad_request("messages", where + ": 'role' must be user or assistant");
    }
    const std::string role = m["role"].get<std::string>();
    const ordered_json content = m.value("content", ordered_json(""));
    if (content.is_string()) {
        out.push_back({{"role", role}, {"content", content}});
        return;
    }
    if (!content.is_array()) throw bad_request("messages", where + ": 'content' must be a string or an array of blocks");
    std::string text;
    ordered_json calls = ordered_json::array();
    ordered_json results = ordered_json::array();
    for (size_t b = 0; b < content.size(); ++b) {
        const ordered_json& block = content[b];
        const std::string at = where + ", block " + std::to_string(b);
        const std::string type = block.is_object() ? block.value("type", std::string()) : "";
        if (type == "text") {
            text += block_text(ordered_json::array({block}), at);
        } else if (type == "tool_use" && role == "assistant") {
            if (!block.contains("id") || !block["id"].is_string() || !block.contains("name") || !block["name"].is_string()) {
                throw bad_request("messages", at + ": a tool_use block needs a string 'id' and 'name'");
            }
            calls.push_back({{"id", block["id"]},
                             {"type", "function"},
                             {"function", {{"name", block["name"]}, {"arguments", block.value("input", ordered_json::object())}}}});
        } else if (type == "tool_result" && role == "user") {
            if (!block.contains("tool_use_id") || !block["tool_use_id"].is_string()) {
                throw bad_request("messages", at + ": a tool_result block needs a string 'tool_use_id'");
            }
            results.push_back({{"role", "tool"},
                               {"tool_call_id", block["tool_use_id"]},
                               {"content", block_text(block.value("content", ordered_json("")), at)}});
        } else {
            throw bad_request("messages", at + ": a '" + type + "' block is not supported in a " + role + " message");
        }
    }
    for (const ordered_json& r : results) out.push_back(r);
    if (role == "assistant") {
        ordered_json message = {{"role", "assistant"}, {"content", text}};
        if (!calls.empty()) message["tool_calls"] = calls;
        out.push_back(std::move(message));
    } else if (!text.empty() || results.empty()) {
        out.push_back({{"role", "user"}, {"content", text}});
    }
}

}  // namespace

std::string anthropic_to_openai(const std::string& text, bool* stream) {
    const ordered_json body = parse_body_object(text);
    static const std::vector<std::string> fields = {"model", "max_tokens", "messages", "system", "temperature", "top_p",
                                                    "top_k", "stop_sequences", "stream", "tools", "tool_choice", "metadata"};
    for (const auto& [key, value] : body.items()) {
        if (!listed(fields, key)) throw bad_request(key, "'" + key + "' is not a field this server implements on /v1/messages");
    }
    if (!body.contains("max_tokens")) throw bad_request("max_tokens", "'max_tokens' is required");
    ordered_json out = ordered_json::object();
    for (const char* key : {"model", "max_tokens", "temperature", "top_p", "top_k"}) {
        if (body.contains(key)) out[key] = body[key];
    }
    if (body.contains("stop_sequences") && !body["stop_sequences"].is_null()) out["stop"] = body["stop_sequences"];
    *stream = body.value("stream", false) == true;
    ordered_json messages = ordered_json::array();
    if (body.contains("system") && !body["system"].is_null()) {
        messages.push_back({{"role", "system"}, {"content", block_text(body["system"], "system")}});
    }
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
        throw bad_request("messages", "'messages' must be a non-empty array");
    }
    for (size_t i = 0; i < body["messages"].size(); ++i) add_messages(body["messages"][i], i, messages);
    out["messages"] = messages;
    if (body.contains("tools") && !body["tools"].is_null()) {
        if (!body["tools"].is_array()) throw bad_request("tools", "'tools' must be an array");
        ordered_json tools = ordered_json::array();
        for (const ordered_json& t : body["tools"]) {
            if (!t.is_object() || !t.contains("name")) throw bad_request("tools", "a tool needs a 'name' (and an 'input_schema')");
            ordered_json function = {{"name", t["name"]}};
            if (t.contains("description")) function["description"] = t["description"];
            function["parameters"] = t.value("input_schema", ordered_json{{"type", "object"}});
            tools.push_back({{"type", "function"}, {"function", function}});
        }
        out["tools"] = tools;
    }
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        const ordered_json& choice = body["tool_choice"];
        const std::string type = choice.is_object() ? choice.value("type", std::string()) : "";
        if (type == "auto") {
            out["tool_choice"] = "auto";
        } else if (type == "any") {
            out["tool_choice"] = "required";
        } else if (type == "none") {
            out["tool_choice"] = "none";
        } else if (type == "tool" && choice.contains("name")) {
            out["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
        } else {
            throw bad_request("tool_choice", "'tool_choice' must be {\"type\": auto | any | none} or {\"type\": \"tool\", \"name\": ...}");
        }
        if (choice.is_object() && choice.value("disable_parallel_tool_use", false) == true) out["parallel_tool_calls"] = false;
    }
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json anthropic_error(const ApiError& e) {
    const std::string type = e.status == 401   ? "authentication_error"
                             : e.status == 404 ? "not_found_error"
                             : e.status == 413 ? "request_too_large"
                             : e.status == 503 ? "overloaded_error"
                             : e.status >= 500 ? "api_error"
                                               : "invalid_request_error";
    return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

std::string anthropic_stop_reason(const std::string& finish_reason) {
    if (finish_reason == "length") return "max_tokens";
    if (finish_reason == "tool_calls") return "tool_use";
    return "end_turn";
}

namespace {

nlohmann::json usage(const CompletionResult& r) {
    return {{"input_tokens", r.prompt_tokens}, {"output_tokens", r.completion_tokens}};
}

}  // namespace

nlohmann::json anthropic_message(const std::string& id, const std::string& model, const CompletionResult& result) {
    nlohmann::json content = nlohmann::json::array();
    if (!result.text.empty() || result.tool_calls.empty()) content.push_back({{"type", "text"}, {"text", result.text}});
    for (const ToolCall& c : result.tool_calls) {
        content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", nlohmann::json::parse(c.arguments)}});
    }
    return {{"id", id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model},
            {"content", content},
            {"stop_reason", anthropic_stop_reason(result.finish_reason)},
            {"stop_sequence", nullptr},
            {"usage", usage(result)}};
}

AnthropicStream::AnthropicStream(std::string id, std::string model, int input_tokens)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

std::vector<AnthropicStream::Event> AnthropicStream::start() const {
    return {{"message_start",
             {{"type", "message_start"},
              {"message", {{"id", id_},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"model", model_},
                           {"content", nlohmann::json::array()},
                           {"stop_reason", nullptr},
                           {"stop_sequence", nullptr},
                           {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}}}}},
            {"ping", {{"type", "ping"}}}};
}

std::vector<AnthropicStream::Event> AnthropicStream::text(const std::string& piece) {
    std::vector<Event> events;
    if (piece.empty()) return events;
    if (!text_open_) {
        events.push_back({"content_block_start",
                          {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", {{"type", "text"}, {"text", ""}}}}});
        text_open_ = true;
    }
    events.push_back({"content_block_delta",
                      {{"type", "content_block_delta"}, {"index", next_index_}, {"delta", {{"type", "text_delta"}, {"text", piece}}}}});
    return events;
}

std::vector<AnthropicStream::Event> AnthropicStream::finish(const CompletionResult& result) {
    std::vector<Event> events;
    const auto stop_block = [&] {
        events.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", next_index_}}});
        ++next_index_;
    };
    if (text_open_) {
        stop_block();
        text_open_ = false;
    }
    for (const ToolCall& c : result.tool_calls) {
        events.push_back({"content_block_start",
                          {{"type", "content_block_start"},
                           {"index", next_index_},
                           {"content_block", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", nlohmann::json::object()}}}}});
        events.push_back({"content_block_delta",
                          {{"type", "content_block_delta"},
                           {"index", next_index_},
                           {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}}});
        stop_block();
    }
    events.push_back({"message_delta",
                      {{"type", "message_delta"},
                       {"delta", {{"stop_reason", anthropic_stop_reason(result.finish_reason)}, {"stop_sequence", nullptr}}},
                       {"usage", {{"output_tokens", result.completion_tokens}}}}});
    events.push_back({"message_stop", {{"type", "message_stop"}}});
    return events;
}

}  // namespace tessera
