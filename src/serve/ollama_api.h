// Ollama's API on the same server: /api/chat and /api/generate are turned
// into the OpenAI request serve already reads (one request model
// underneath, so structured output, tool calls and every plan work through
// both), and the answers back into Ollama's shapes, streamed as
// newline-delimited JSON; /api/tags and /api/show describe the model.
//
// Options serve cannot change per request are accepted and ignored, with
// the reason in ollama_ignored_options(); any other unknown field or option
// is a 400 naming it.
#pragma once

#include "serve/openai_api.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace tessera {

// The OpenAI body (as text) for an Ollama /api/chat (chat) or /api/generate
// request. /api/generate becomes a chat of its system and prompt, or with
// "raw" a completion of the prompt as written. Sets *stream (Ollama streams
// unless told not to). Throws ApiError.
std::string ollama_to_openai(const std::string& body, bool chat, bool* stream);

const std::vector<std::pair<std::string, std::string>>& ollama_ignored_options();

// An Ollama error body: {"error": message}.
nlohmann::json ollama_error(const ApiError& e);

// What the answer's last line holds besides the text: Ollama's counts and
// durations (nanoseconds).
struct OllamaTimings {
    int prompt_tokens = 0;
    int generated_tokens = 0;
    double prompt_seconds = 0.0;
    double total_seconds = 0.0;
};

// A streamed piece (done: false), or with done the whole answer's last line
// (its text, tool calls and timings).
nlohmann::json ollama_message(bool chat, const std::string& model, const std::string& text,
                              const std::vector<ToolCall>* calls, const std::string& done_reason,
                              const OllamaTimings* timings);

}  // namespace tessera
