// The OpenAI HTTP API's shapes: a request body read as hostile input (every
// field checked for type and range; an error names the field), the response
// objects and stream chunks, and error objects with their HTTP status.
#pragma once

#include "grammar/grammar.h"
#include "serve/tool_calls.h"

#include <nlohmann/json.hpp>

#include <memory>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// An error the client caused (or the server's state), as OpenAI reports it.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;
    std::string code;  // OpenAI's machine-readable code ("model_not_found"), or none
    nlohmann::json body() const;
};

// A 400 naming the request field at fault (every API's parser reports so).
inline ApiError bad_request(const std::string& param, const std::string& message) {
    return ApiError{400, message, "invalid_request_error", param};
}

// A request body that must be a JSON object, read in its written order;
// a 400 otherwise (Ollama's and Anthropic's translators start here).
nlohmann::ordered_json parse_body_object(const std::string& text);

// Whether `key` is one of `names` (the parsers' lists of fields they know).
inline bool listed(const std::vector<std::string>& names, const std::string& key) {
    for (const std::string& n : names) {
        if (n == key) return true;
    }
    return false;
}

// The request fields serve accepts but does not act on, each with the
// reason (for --help); any other field it does not implement is a 400.
const std::vector<std::pair<std::string, std::string>>& ignored_request_fields();

// tool_choice: let the model choose, no calls, at least one call, or a call
// of one named function.
enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

// OpenAI's limit on a request's functions.
inline constexpr size_t kMaxTools = 128;

struct CompletionRequest {
    bool chat = true;
    std::string model;                // as the client named it ("" when absent); the server checks it
    nlohmann::ordered_json messages;  // chat: [{"role", "content"}] with text content
    std::string prompt;               // completions
    int max_tokens = -1;              // -1: until the end of the turn or the context
    float temperature = 1.0f;
    float top_p = 1.0f;
    int top_k = 0;        // llama.cpp's extension; 0: off
    float min_p = 0.0f;   // llama.cpp's extension; 0: off
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    // {"token id": bias in [-100, 100]}; ids are checked against the
    // vocabulary by the server.
    std::vector<std::pair<int32_t, float>> logit_bias;
    bool stream = false;
    bool include_usage = false;
    bool logprobs = false;  // chat: "logprobs": true; completions: "logprobs": N
    int top_logprobs = 0;   // alternatives per token (chat <= 20, completions <= 5)
    // What the output must match, from response_format (json_object,
    // json_schema) or llama.cpp's "grammar" (GBNF); null for free text.
    // With a required or named tool call: the grammar of the calls.
    std::shared_ptr<const Grammar> grammar;
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as the client wrote them
    std::vector<std::string> tool_names;
    ToolChoice tool_choice = ToolChoice::kAuto;
    std::string tool_name;  // kNamed
    bool parallel_tool_calls = true;
};

// A generated token's log-probability and the most likely alternatives.
struct TokenLogprob {
    std::string token;  // its bytes (a piece of a character is written with U+FFFD in JSON)
    float logprob = 0.0f;
    std::vector<std::pair<std::string, float>> top;
};

// From the logits the token was sampled from.
TokenLogprob token_logprob(const class Tokenizer& tokenizer, int32_t token, const float* logits, int32_t n_vocab,
                           int top);
// The "logprobs" object of a choice: chat's {"content": [...]} or the legacy
// completions' {"tokens", "token_logprobs", "top_logprobs"}.
nlohmann::json logprobs_json(bool chat, const std::vector<TokenLogprob>& entries);

// Throws ApiError (status 400) naming the offending field. tool_format: the
// syntax of the served model's tool calls (a required call is held to it).
CompletionRequest parse_completion_request(const std::string& body, bool chat,
                                           ToolCallFormat tool_format = ToolCallFormat::kHermes);

struct CompletionResult {
    std::string text;
    std::vector<TokenLogprob> logprobs;  // when requested
    std::string finish_reason;  // "stop", "length" or "tool_calls"
    std::vector<ToolCall> tool_calls;
    std::string reasoning;  // a reasoning model's thinking, apart from the answer (gpt-oss's analysis channel)
    int prompt_tokens = 0;
    int completion_tokens = 0;
    double prompt_seconds = 0.0;
};

nlohmann::json usage_json(const CompletionResult& r);
nlohmann::json completion_json(const CompletionRequest& req, const CompletionResult& r, const std::string& id,
                               const std::string& model, int64_t created);
// One server-sent event's JSON: a delta of text (chat) or text (completions),
// with finish_reason when it is the last.
nlohmann::json chunk_json(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created,
                          const std::string& text, const std::string& finish_reason, bool first,
                          const std::vector<TokenLogprob>* logprobs = nullptr);

// The chunks that stream an answer's tool calls, OpenAI's way.
std::vector<nlohmann::json> tool_call_chunks_json(const std::string& id, const std::string& model, int64_t created,
                                                  const std::vector<ToolCall>& calls);

// JSON text of a response: invalid UTF-8 (a token holding part of a
// character) is written as U+FFFD rather than failing.
std::string dump_json(const nlohmann::json& j);

}  // namespace tessera
