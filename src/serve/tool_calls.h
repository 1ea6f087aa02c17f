// Tool calls in each model family's own syntax: which syntax a chat template
// teaches, the grammar that makes a model write a call to given functions
// (tool_choice "required" or a named function), and the calls read back out
// of the generated text, whole or as it streams.
//
//   family            what the model writes
//   Hermes / Qwen     <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (one block per call)
//   Llama 3.x         {"name": ..., "parameters": {...}} (after <|python_tag|> or alone; ';' between calls)
//   Mistral           [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (the marker is a control token)
//   gpt-oss harmony   messages of channels: <|channel|>analysis<|message|>... (reasoning),
//                     <|channel|>final<|message|>... (the answer), and a call as
//                     " to=functions.NAME<|channel|>commentary json<|message|>{...}" ended by <|call|>
// A template that names none of them (ChatML, the built-ins) gets Hermes's.
// Harmony is read by its control tokens: its answers are generated with them
// as text (GenerationParams::render_special), and only the final channel is
// shown as the answer's content.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessera {

enum class ToolCallFormat { kHermes, kLlama3, kMistral, kHarmony };

ToolCallFormat tool_call_format(const std::string& template_source);
const char* tool_call_format_name(ToolCallFormat format);

struct ToolCall {
    std::string id;         // 9 letters and digits (Mistral's templates require that shape)
    std::string name;
    std::string arguments;  // the arguments object as JSON text
};

struct ParsedAnswer {
    std::string content;          // the text outside the calls (harmony: the final channel)
    std::string reasoning;        // harmony: the analysis channel
    std::vector<ToolCall> calls;  // in the order written
};

// Reads the calls in `text`; text that is not a well-formed call (JSON that
// does not parse, a call to no known function) stays content. Ids are drawn
// from `seed`, so the same answer gets the same ids.
ParsedAnswer parse_tool_calls(ToolCallFormat format, const std::string& text,
                              const std::vector<std::string>& function_names, uint64_t seed);

// GBNF that holds the output to calls of the given functions in `format`:
// `tools` is the request's tools array; `only` names one function (else any
// of them); `parallel` allows more than one call. Arguments follow each
// function's parameters schema. Throws GrammarError.
std::string tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools, const std::string& only,
                              bool parallel);

// Streams an answer that may turn into tool calls: text is passed on as it
// comes, except what could be the start of a call, held back until it is
// known; from a call's start on, nothing more is passed (it is parsed at
// the end).
class ToolCallStream {
public:
    explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
    // The text that may be shown now.
    std::string push(const std::string& piece);
    // Everything generated, and what push has not passed on.
    const std::string& text() const { return text_; }
    // At the end, when the answer held no call: what push held back.
    std::string finish() const;
    bool in_call() const { return in_call_; }

private:
    ToolCallFormat format_;
    std::string text_;
    size_t shown_ = 0;
    bool in_call_ = false;
    std::string harmony_shown_;  // harmony: the final text passed on so far
};

}  // namespace tessera
