// Anthropic's Messages API (/v1/messages) on the same server: a request is
// turned into the OpenAI request serve reads (system blocks, text, tool_use
// and tool_result blocks, tools with input_schema, tool_choice auto / any /
// tool / none), and the answer back into a message of content blocks, or
// streamed as Anthropic's server-sent events (message_start,
// content_block_start/delta/stop, message_delta, message_stop).
#pragma once

#include "serve/openai_api.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessera {

// The OpenAI body (as text); sets *stream. Throws ApiError.
std::string anthropic_to_openai(const std::string& body, bool* stream);

// Anthropic's error body: {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error(const ApiError& e);

// Anthropic's stop_reason for serve's finish_reason.
std::string anthropic_stop_reason(const std::string& finish_reason);

// The whole answer as a message.
nlohmann::json anthropic_message(const std::string& id, const std::string& model, const CompletionResult& result);

// The events of a streamed answer, one call per piece of it. Each event is
// (name, data).
class AnthropicStream {
public:
    using Event = std::pair<std::string, nlohmann::json>;
    AnthropicStream(std::string id, std::string model, int input_tokens);
    std::vector<Event> start() const;
    std::vector<Event> text(const std::string& piece);
    std::vector<Event> finish(const CompletionResult& result);

private:
    std::string id_, model_;
    int input_tokens_ = 0;
    bool text_open_ = false;
    int next_index_ = 0;
};

}  // namespace tessera
