#include "serve/ollama_api.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace tessera {

namespace {

using ordered_json = nlohmann::ordered_json;

// The options that map onto the OpenAI request (Ollama's name -> OpenAI's).
const std::vector<std::pair<std::string, std::string>>& mapped_options() {
    static const std::vector<std::pair<std::string, std::string>> options = {
        {"temperature", "temperature"}, {"top_p", "top_p"},   {"top_k", "top_k"},
        {"min_p", "min_p"},             {"seed", "seed"},     {"num_predict", "max_tokens"},
        {"stop", "stop"},               {"presence_penalty", "presence_penalty"},
        {"frequency_penalty", "frequency_penalty"},
    };
    return options;
}

// Ollama's tool calls carry no ids; the OpenAI request links results to
// calls by id, so each call gets one, and a tool message the id of the
// latest call of its function.
std::string call_id(size_t n) {
    char buf[16];
    snprintf(buf, sizeof buf, "c%08zu", n % 100000000);
    return buf;
}

ordered_json openai_messages(const ordered_json& messages) {
    if (!messages.is_array()) throw bad_request("messages", "'messages' must be an array");
    ordered_json out = ordered_json::array();
    std::vector<std::pair<std::string, std::string>> calls;  // name, id
    for (size_t i = 0; i < messages.size(); ++i) {
        const ordered_json& m = messages[i];
        const std::string where = "message " + std::to_string(i);
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) throw bad_request("messages", where + " needs a string 'role'");
        for (const auto& [key, value] : m.items()) {
            if (!listed({"role", "content", "images", "tool_calls", "tool_name", "thinking"}, key)) {
                throw bad_request("messages", where + ": '" + key + "' is not a message field this server implements");
            }
        }
        if (m.contains("images") && !m["images"].is_null() && !(m["images"].is_array() && m["images"].empty())) {
            throw bad_request("messages", where + ": images are not supported (the models served are text only)");
        }
        ordered_json message = {{"role", m["role"]}, {"content", m.value("content", ordered_json(""))}};
        if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
            ordered_json list = ordered_json::array();
            for (const ordered_json& c : m["tool_calls"]) {
                if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
                    throw bad_request("messages", where + ": a tool call needs a 'function'");
                }
                const std::string id = call_id(calls.size() + 1);
                const std::string name = c["function"].value("name", std::string());
                calls.emplace_back(name, id);
                list.push_back({{"id", id},
                                {"type", "function"},
                                {"function", {{"name", name}, {"arguments", c["function"].value("arguments", ordered_json::object())}}}});
            }
            message["tool_calls"] = list;
        }
        if (m["role"] == "tool") {
            const std::string name = m.value("tool_name", std::string());
            std::string id = calls.empty() ? call_id(0) : calls.back().second;
            for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
                if (it->first == name) {
                    id = it->second;
                    break;
                }
            }
            message["tool_call_id"] = id;
            if (!name.empty()) message["name"] = name;
        }
        out.push_back(std::move(message));
    }
    return out;
}

std::string now_rfc3339() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
    char out[64];
    snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(micros));
    return out;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& ollama_ignored_options() {
    static const std::vector<std::pair<std::string, std::string>> options = {
        {"keep_alive", "the model stays loaded while serve runs"},
        {"num_ctx", "the context is fixed when serve starts (-c)"},
        {"num_thread", "threads are fixed when serve starts (-t)"},
        {"num_batch", "the batch is fixed when serve starts (-b)"},
        {"num_gpu", "no GPU offload"},
        {"main_gpu", "no GPU offload"},
        {"low_vram", "no GPU offload"},
        {"use_mmap", "how weights load is fixed when serve starts"},
        {"use_mlock", "how weights load is fixed when serve starts"},
        {"numa", "no NUMA placement"},
        {"f16_kv", "the KV cache type is fixed when serve starts (-ctk/-ctv)"},
    };
    return options;
}

std::string ollama_to_openai(const std::string& text, bool chat, bool* stream) {
    const ordered_json body = parse_body_object(text);
    const auto ignored = [](const std::string& key) {
        const auto& list = ollama_ignored_options();
        return std::any_of(list.begin(), list.end(), [&](const auto& o) { return o.first == key; });
    };
    const std::vector<std::string> chat_fields = {"model", "messages", "stream", "format", "tools", "options", "think"};
    const std::vector<std::string> generate_fields = {"model", "prompt", "system", "stream", "raw", "format", "options", "think", "images"};
    for (const auto& [key, value] : body.items()) {
        if (listed(chat ? chat_fields : generate_fields, key) || ignored(key)) continue;
        throw bad_request(key, "'" + key + "' is not a field this server implements on /api/" + (chat ? "chat" : "generate"));
    }
    ordered_json out = ordered_json::object();
    if (body.contains("model")) out["model"] = body["model"];
    *stream = true;
    if (body.contains("stream") && !body["stream"].is_null()) {
        if (!body["stream"].is_boolean()) throw bad_request("stream", "'stream' must be a boolean");
        *stream = body["stream"].get<bool>();
    }
    out["stream"] = false;  // serve streams Ollama's way itself
    if (body.contains("think") && body["think"] != false && !body["think"].is_null()) {
        throw bad_request("think", "'think' is not supported: the reasoning stays in the answer's text");
    }
    if (chat) {
        out["messages"] = openai_messages(body.value("messages", ordered_json::array()));
        if (body.contains("tools") && !body["tools"].is_null()) out["tools"] = body["tools"];
    } else {
        if (!body.contains("prompt") || !body["prompt"].is_string()) throw bad_request("prompt", "'prompt' must be a string");
        if (body.contains("images") && !body["images"].is_null() && !(body["images"].is_array() && body["images"].empty())) {
            throw bad_request("images", "images are not supported (the models served are text only)");
        }
        if (body.value("raw", false)) {
            out["prompt"] = body["prompt"];
        } else {
            ordered_json messages = ordered_json::array();
            if (body.contains("system") && body["system"].is_string()) messages.push_back({{"role", "system"}, {"content", body["system"]}});
            messages.push_back({{"role", "user"}, {"content", body["prompt"]}});
            out["messages"] = messages;
        }
    }
    if (body.contains("format") && !body["format"].is_null() && body["format"] != "") {
        const ordered_json& format = body["format"];
        if (format == "json") {
            out["response_format"] = {{"type", "json_object"}};
        } else if (format.is_object()) {
            out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", format}}}};
        } else {
            throw bad_request("format", "'format' must be \"json\" or a JSON schema object");
        }
    }
    if (body.contains("options") && !body["options"].is_null()) {
        if (!body["options"].is_object()) throw bad_request("options", "'options' must be an object");
        for (const auto& item : body["options"].items()) {
            // (C++20 lambdas cannot capture structured bindings on clang 14.)
            const std::string key = item.key();
            const ordered_json& value = item.value();
            if (ignored(key)) continue;
            const auto& mapped = mapped_options();
            const auto it = std::find_if(mapped.begin(), mapped.end(), [&](const auto& o) { return o.first == key; });
            if (it == mapped.end()) throw bad_request("options", "option '" + key + "' is not one this server implements");
            // num_predict < 0 means "no limit" in Ollama.
            if (key == "num_predict" && value.is_number_integer() && value.get<int64_t>() < 0) continue;
            out[it->second] = value;
        }
    }
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ollama_error(const ApiError& e) {
    return {{"error", e.param.empty() ? e.message : e.message + " (field '" + e.param + "')"}};
}

nlohmann::json ollama_message(bool chat, const std::string& model, const std::string& text,
                              const std::vector<ToolCall>* calls, const std::string& done_reason,
                              const OllamaTimings* timings) {
    nlohmann::json j = {{"model", model}, {"created_at", now_rfc3339()}};
    if (chat) {
        j["message"] = {{"role", "assistant"}, {"content", text}};
        if (calls != nullptr && !calls->empty()) {
            nlohmann::json list = nlohmann::json::array();
            for (const ToolCall& c : *calls) {
                list.push_back({{"function", {{"name", c.name}, {"arguments", nlohmann::json::parse(c.arguments)}}}});
            }
            j["message"]["tool_calls"] = list;
        }
    } else {
        j["response"] = text;
    }
    j["done"] = timings != nullptr;
    if (timings != nullptr) {
        const auto ns = [](double s) { return static_cast<int64_t>(s * 1e9); };
        j["done_reason"] = done_reason;
        j["total_duration"] = ns(timings->total_seconds);
        j["load_duration"] = 0;
        j["prompt_eval_count"] = timings->prompt_tokens;
        j["prompt_eval_duration"] = ns(timings->prompt_seconds);
        j["eval_count"] = timings->generated_tokens;
        j["eval_duration"] = ns(std::max(0.0, timings->total_seconds - timings->prompt_seconds));
    }
    return j;
}

}  // namespace tessera
