#include "serve/tool_calls.h"

#include "grammar/grammar.h"
#include "grammar/json_schema_grammar.h"
#include "util/rng.h"

#include <algorithm>

namespace tessera {

ToolCallFormat tool_call_format(const std::string& source) {
    if (source.find("<|channel|>") != std::string::npos) return ToolCallFormat::kHarmony;
    if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::kMistral;
    if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::kHermes;
    if (source.find("<|python_tag|>") != std::string::npos || source.find("ipython") != std::string::npos) {
        return ToolCallFormat::kLlama3;
    }
    return ToolCallFormat::kHermes;
}

const char* tool_call_format_name(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::kHermes: return "hermes";
        case ToolCallFormat::kLlama3: return "llama3";
        case ToolCallFormat::kMistral: return "mistral";
        case ToolCallFormat::kHarmony: return "harmony";
    }
    return "?";
}

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr const char* kHermesOpen = "<tool_call>";
constexpr const char* kHermesClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";
constexpr const char* kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};

// Harmony's messages in an answer: each header (recipient, channel) and
// body. The first message is the one the prompt's <|start|>assistant began.
struct HarmonyMessage {
    std::string channel;
    std::string recipient;  // "functions.NAME", or empty
    std::string body;
    bool complete = false;  // its end marker was seen
};

std::vector<HarmonyMessage> harmony_messages(const std::string& text) {
    std::vector<HarmonyMessage> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t next_start = text.find(kStart, pos);
        const size_t end_of_segment = next_start == std::string::npos ? text.size() : next_start;
        const std::string segment = text.substr(pos, end_of_segment - pos);
        pos = next_start == std::string::npos ? text.size() : next_start + kStart.size();
        const size_t message = segment.find(kMessage);
        if (message == std::string::npos) {
            if (!segment.empty()) out.push_back({"", "", segment, false});  // text outside any message
            continue;
        }
        const std::string header = segment.substr(0, message);
        HarmonyMessage m;
        const size_t channel = header.find(kChannel);
        if (channel != std::string::npos) {
            size_t a = channel + kChannel.size();
            size_t b = a;
            while (b < header.size() && header[b] != ' ' && header[b] != '<') ++b;
            m.channel = header.substr(a, b - a);
        }
        const size_t to = header.find("to=");
        if (to != std::string::npos) {
            size_t b = to + 3;
            while (b < header.size() && header[b] != ' ' && header[b] != '<') ++b;
            m.recipient = header.substr(to + 3, b - to - 3);
        }
        std::string body = segment.substr(message + kMessage.size());
        for (const std::string_view end : kEnds) {
            const size_t at = body.find(end);
            if (at != std::string::npos) {
                body.resize(at);
                m.complete = true;
            }
        }
        m.body = body;
        out.push_back(std::move(m));
    }
    return out;
}

std::string call_id(Rng& rng) {
    static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id;
    for (int i = 0; i < 9; ++i) id += kAlphabet[rng.next_u64() % (sizeof kAlphabet - 1)];
    return id;
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return {};
    const size_t b = s.find_last_not_of(" \t\r\n");
    return s.substr(a, b - a + 1);
}

// One call object: {"name": ..., "arguments" | "parameters": {...}}.
bool read_call(const ordered_json& j, const std::vector<std::string>& names, ToolCall& call) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    const std::string name = j["name"].get<std::string>();
    if (std::find(names.begin(), names.end(), name) == names.end()) return false;
    const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
    ordered_json arguments = key != nullptr ? j[key] : ordered_json::object();
    if (arguments.is_string()) {  // some models write the arguments as a JSON string
        try {
            arguments = ordered_json::parse(arguments.get<std::string>());
        } catch (const nlohmann::json::exception&) {
            return false;
        }
    }
    if (!arguments.is_object()) return false;
    call.name = name;
    call.arguments = arguments.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return true;
}

// JSON values one after another in `text` from `pos` (separators ',' ';'
// and whitespace between them); false when something else is there.
bool read_json_sequence(const std::string& text, size_t pos, std::vector<ordered_json>& values) {
    while (pos < text.size()) {
        while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t' || text[pos] == '\r' ||
                                     text[pos] == ';' || text[pos] == ',')) {
            ++pos;
        }
        if (pos >= text.size()) break;
        // nlohmann reads one value and reports where it stopped through the
        // SAX interface; simpler: find the shortest prefix that parses.
        bool found = false;
        int depth = 0;
        bool in_string = false;
        for (size_t i = pos; i < text.size(); ++i) {
            const char c = text[i];
            if (in_string) {
                if (c == '\\') {
                    ++i;
                } else if (c == '"') {
                    in_string = false;
                }
                continue;
            }
            if (c == '"') in_string = true;
            if (c == '{' || c == '[') ++depth;
            if (c == '}' || c == ']') --depth;
            if (depth == 0) {
                try {
                    values.push_back(ordered_json::parse(text.substr(pos, i + 1 - pos)));
                } catch (const nlohmann::json::exception&) {
                    return false;
                }
                pos = i + 1;
                found = true;
                break;
            }
            if (depth < 0) return false;
        }
        if (!found) return false;
    }
    return true;
}

}  // namespace

ParsedAnswer parse_tool_calls(ToolCallFormat format, const std::string& text, const std::vector<std::string>& names,
                              uint64_t seed) {
    ParsedAnswer out;
    Rng rng(seed);
    if (format == ToolCallFormat::kHarmony) {
        const std::string prefix = "functions.";
        for (const HarmonyMessage& m : harmony_messages(text)) {
            if (m.recipient.rfind(prefix, 0) == 0) {
                ToolCall call;
                ordered_json wrapped;
                try {
                    wrapped = {{"name", m.recipient.substr(prefix.size())}, {"arguments", ordered_json::parse(m.body)}};
                } catch (const nlohmann::json::exception&) {
                    out.content += m.body;
                    continue;
                }
                if (read_call(wrapped, names, call)) {
                    call.id = call_id(rng);
                    out.calls.push_back(std::move(call));
                    continue;
                }
                out.content += m.body;
            } else if (m.channel == "analysis") {
                out.reasoning += m.body;
            } else {
                out.content += m.body;  // final, a commentary preamble, or text outside messages
            }
        }
        return out;
    }
    if (format == ToolCallFormat::kHermes) {
        size_t pos = 0;
        while (pos < text.size()) {
            const size_t open = text.find(kHermesOpen, pos);
            if (open == std::string::npos) break;
            const size_t body = open + std::string(kHermesOpen).size();
            const size_t close = text.find(kHermesClose, body);
            ToolCall call;
            bool ok = false;
            if (close != std::string::npos) {
                try {
                    ok = read_call(ordered_json::parse(trim(text.substr(body, close - body))), names, call);
                } catch (const nlohmann::json::exception&) {
                    ok = false;
                }
            }
            if (!ok) break;
            out.content += text.substr(pos, open - pos);
            call.id = call_id(rng);
            out.calls.push_back(std::move(call));
            pos = close + std::string(kHermesClose).size();
        }
        out.content += text.substr(std::min(pos, text.size()));
        if (!out.calls.empty()) out.content = trim(out.content);
        return out;
    }
    // Llama 3 and Mistral: the whole answer is the calls, or it is text.
    std::string body = trim(text);
    if (format == ToolCallFormat::kLlama3 && body.rfind(kPythonTag, 0) == 0) body = body.substr(std::string(kPythonTag).size());
    if (format == ToolCallFormat::kMistral && body.rfind(kMistralMarker, 0) == 0) {
        body = body.substr(std::string(kMistralMarker).size());
    }
    std::vector<ordered_json> values;
    if (body.empty() || (body[0] != '{' && body[0] != '[') || !read_json_sequence(body, 0, values)) {
        out.content = text;
        return out;
    }
    std::vector<ordered_json> objects;
    for (const ordered_json& v : values) {
        if (v.is_array()) {
            for (const ordered_json& item : v) objects.push_back(item);
        } else {
            objects.push_back(v);
        }
    }
    for (const ordered_json& o : objects) {
        ToolCall call;
        if (!read_call(o, names, call)) {
            out.calls.clear();
            out.content = text;
            return out;
        }
        call.id = call_id(rng);
        out.calls.push_back(std::move(call));
    }
    if (out.calls.empty()) out.content = text;
    return out;
}

namespace {

std::string gbnf_string_literal(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

}  // namespace

std::string tool_call_grammar(ToolCallFormat format, const ordered_json& tools, const std::string& only, bool parallel) {
    std::vector<std::pair<std::string, ordered_json>> schemas;
    std::vector<std::string> calls;
    for (size_t i = 0; i < tools.size(); ++i) {
        const ordered_json& function = tools[i]["function"];
        const std::string name = function["name"].get<std::string>();
        if (!only.empty() && name != only) continue;
        const std::string rule = "args-" + std::to_string(i);
        schemas.emplace_back(rule, function.contains("parameters") ? function["parameters"]
                                                                   : ordered_json{{"type", "object"}});
        // The name is JSON text inside a GBNF literal.
        const std::string quoted_name = ordered_json(name).dump();
        switch (format) {
            case ToolCallFormat::kHermes:
                calls.push_back(gbnf_string_literal("<tool_call>\n{\"name\": " + quoted_name + ", \"arguments\": ") + " " +
                                rule + " " + gbnf_string_literal("}\n</tool_call>"));
                break;
            case ToolCallFormat::kLlama3:
                calls.push_back(gbnf_string_literal("{\"name\": " + quoted_name + ", \"parameters\": ") + " " + rule + " " +
                                gbnf_string_literal("}"));
                break;
            case ToolCallFormat::kMistral:
                calls.push_back(gbnf_string_literal("{\"name\": " + quoted_name + ", \"arguments\": ") + " " + rule + " " +
                                gbnf_string_literal("}"));
                break;
            case ToolCallFormat::kHarmony:
                // As the template writes a call after "<|start|>assistant";
                // <|call|> then ends the generation.
                calls.push_back(gbnf_string_literal(" to=functions." + name + "<|channel|>commentary json<|message|>") + " " + rule);
                break;
        }
    }
    if (calls.empty()) throw GrammarError("no function named '" + only + "' among the tools");
    std::string call_rule = "call ::= ";
    for (size_t i = 0; i < calls.size(); ++i) call_rule += (i > 0 ? " | " : "") + calls[i];
    std::string root;
    switch (format) {
        case ToolCallFormat::kHermes: root = parallel ? "root ::= call (\"\\n\" call)*" : "root ::= call"; break;
        case ToolCallFormat::kLlama3: root = parallel ? "root ::= call (\"; \" call)*" : "root ::= call"; break;
        case ToolCallFormat::kMistral: root = parallel ? "root ::= \"[\" call (\", \" call)* \"]\"" : "root ::= \"[\" call \"]\""; break;
        case ToolCallFormat::kHarmony: root = "root ::= call"; break;  // one call per turn: <|call|> ends it
    }
    return root + "\n" + call_rule + "\n" + json_schemas_to_gbnf_rules(schemas);
}

namespace {

// Harmony's answer as shown: the final channel's text so far, without a
// trailing piece that may still become a marker.
std::string harmony_visible(const std::string& text, bool whole = false) {
    std::string shown;
    for (const HarmonyMessage& m : harmony_messages(text)) {
        if (m.channel == "final") shown += m.body;
    }
    const size_t marker = shown.rfind("<|");
    if (!whole && marker != std::string::npos && shown.find("|>", marker) == std::string::npos) shown.resize(marker);
    return shown;
}

}  // namespace

std::string ToolCallStream::finish() const {
    if (format_ != ToolCallFormat::kHarmony) return text_.substr(shown_);
    const std::string whole = harmony_visible(text_, true);
    return whole.size() > shown_ ? whole.substr(shown_) : std::string();
}

std::string ToolCallStream::push(const std::string& piece) {
    text_ += piece;
    if (format_ == ToolCallFormat::kHarmony) {
        const std::string visible = harmony_visible(text_);
        if (visible.size() <= shown_ || visible.compare(0, shown_, harmony_shown_) != 0) return {};
        std::string out = visible.substr(shown_);
        harmony_shown_ = visible;
        shown_ = visible.size();
        return out;
    }
    if (in_call_) return {};
    // Where a call could begin: Hermes's tag anywhere; the others only at the
    // start of the answer (after whitespace).
    const std::string start = format_ == ToolCallFormat::kHermes ? kHermesOpen : "";
    if (format_ != ToolCallFormat::kHermes) {
        if (shown_ > 0) {  // the answer began as text: it stays text
            std::string out = text_.substr(shown_);
            shown_ = text_.size();
            return out;
        }
        const size_t first = text_.find_first_not_of(" \t\r\n");
        if (first == std::string::npos) return {};
        const std::string head = text_.substr(first);
        const auto begins = [&](const std::string& tag) {
            return head.rfind(tag, 0) == 0 || (head.size() < tag.size() && tag.rfind(head, 0) == 0);
        };
        if (head[0] == '{' || head[0] == '[' || begins(kPythonTag) || begins(kMistralMarker)) {
            // A call, or the start of one's marker: decided at the end.
            if (head[0] == '{' || head[0] == '[' || head.size() >= std::string(kPythonTag).size()) in_call_ = true;
            return {};
        }
        shown_ = text_.size();
        return text_;
    }
    const size_t found = text_.find(start, shown_);
    if (found != std::string::npos) {
        in_call_ = true;
        std::string out = text_.substr(shown_, found - shown_);
        shown_ = found;
        return out;
    }
    // Hold back a tail that is a prefix of the tag.
    size_t keep = 0;
    for (size_t n = std::min(start.size() - 1, text_.size() - shown_); n > 0; --n) {
        if (text_.compare(text_.size() - n, n, start, 0, n) == 0) {
            keep = n;
            break;
        }
    }
    const size_t upto = text_.size() - keep;
    std::string out = text_.substr(shown_, upto - shown_);
    shown_ = upto;
    return out;
}

}  // namespace tessera
