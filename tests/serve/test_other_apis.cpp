// Ollama's and Anthropic's requests as hostile input: wrong types, unknown
// fields and options, missing required fields, oversized values and broken
// JSON are each an ApiError (400) naming the field, never another exception;
// a well-formed request becomes the OpenAI request serve reads, with the
// same meaning (options, format, tools, tool results).
#include "serve/anthropic_api.h"
#include "serve/ollama_api.h"
#include "serve/openai_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tessera {
namespace {

std::string ollama_error_of(const std::string& body, bool chat) {
    try {
        bool stream = false;
        parse_completion_request(ollama_to_openai(body, chat, &stream), true);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400) << body;
        return e.param + ": " + e.message;
    }
    return "";
}

std::string anthropic_error_of(const std::string& body) {
    try {
        bool stream = false;
        parse_completion_request(anthropic_to_openai(body, &stream), true);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400) << body;
        return e.param + ": " + e.message;
    }
    return "";
}

TEST(OllamaApi, RequestsBecomeTheOpenAiRequest) {
    bool stream = false;
    const auto j = nlohmann::json::parse(ollama_to_openai(
        R"({"model": "m", "messages": [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
            {"role": "tool", "tool_name": "f", "content": "ok"}],
            "format": "json", "options": {"temperature": 0.5, "num_predict": 12, "num_ctx": 8192, "seed": 3},
            "tools": [{"type": "function", "function": {"name": "f"}}]})",
        true, &stream));
    EXPECT_TRUE(stream);  // Ollama streams unless told not to
    EXPECT_EQ(j["max_tokens"], 12);
    EXPECT_EQ(j["temperature"], 0.5);
    EXPECT_EQ(j["seed"], 3);
    EXPECT_FALSE(j.contains("num_ctx"));  // accepted and ignored
    EXPECT_EQ(j["response_format"]["type"], "json_object");
    EXPECT_EQ(j["messages"][2]["tool_call_id"], j["messages"][1]["tool_calls"][0]["id"]);
    EXPECT_EQ(j["messages"][2]["name"], "f");
    const auto raw = nlohmann::json::parse(ollama_to_openai(R"({"prompt": "x", "raw": true, "stream": false})", false, &stream));
    EXPECT_FALSE(stream);
    EXPECT_EQ(raw["prompt"], "x");
}

TEST(OllamaApi, HostileRequestsAre400sNamingTheField) {
    const std::pair<std::string, std::string> chat_cases[] = {
        {"{not json", "not valid JSON"},
        {"[1]", "must be a JSON object"},
        {R"({"messages": "hi"})", "messages: 'messages' must be an array"},
        {R"({"messages": [{"content": "x"}]})", "needs a string 'role'"},
        {R"({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", "images are not supported"},
        {R"({"messages": [{"role": "user", "content": "x", "colour": 1}]})", "'colour' is not a message field"},
        {R"({"messages": [], "stream": "yes"})", "stream: 'stream' must be a boolean"},
        {R"({"messages": [], "options": {"mirostat": 2}})", "option 'mirostat'"},
        {R"({"messages": [], "options": 7})", "'options' must be an object"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"temperature": "hot"}})", "temperature"},
        {R"({"messages": [{"role": "user", "content": "x"}], "options": {"temperature": 1e300}})", "temperature"},
        {R"({"messages": [], "format": 42})", "'format' must be"},
        {R"({"messages": [], "think": true})", "'think' is not supported"},
        {R"({"messages": [], "keep_alive": "5m", "suffix": "x"})", "'suffix' is not a field"},
        {R"({"messages": [{"role": "user", "content": "x"}], "format": {"type": "string", "pattern": "a"}})", "'pattern'"},
    };
    for (const auto& [body, expected] : chat_cases) {
        const std::string error = ollama_error_of(body, true);
        EXPECT_NE(error.find(expected), std::string::npos) << body << "\ngave: " << error;
    }
    EXPECT_NE(ollama_error_of(R"({"prompt": 5})", false).find("'prompt' must be a string"), std::string::npos);
    EXPECT_NE(ollama_error_of(R"({"prompt": "x", "template": "{{.Prompt}}"})", false).find("'template' is not a field"),
              std::string::npos);
    // A huge prompt is the server's body cap (413) before it is parsed; a
    // long one parses.
    EXPECT_EQ(ollama_error_of(R"({"prompt": ")" + std::string(500000, 'a') + R"("})", false), "");
}

TEST(AnthropicApi, RequestsBecomeTheOpenAiRequest) {
    bool stream = false;
    const auto j = nlohmann::json::parse(anthropic_to_openai(
        R"({"model": "m", "max_tokens": 9, "stream": true, "system": [{"type": "text", "text": "be brief"}],
            "stop_sequences": ["END"], "messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "let me look"},
                                              {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                                         {"type": "text", "text": "and?"}]}],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true}})",
        &stream));
    EXPECT_TRUE(stream);
    EXPECT_EQ(j["messages"][0]["role"], "system");
    EXPECT_EQ(j["messages"][2]["tool_calls"][0]["function"]["arguments"]["a"], 1);
    EXPECT_EQ(j["messages"][3]["role"], "tool");
    EXPECT_EQ(j["messages"][3]["tool_call_id"], "t1");
    EXPECT_EQ(j["messages"][4]["content"], "and?");
    EXPECT_EQ(j["tool_choice"]["function"]["name"], "f");
    EXPECT_EQ(j["parallel_tool_calls"], false);
    EXPECT_EQ(j["stop"][0], "END");
}

TEST(AnthropicApi, HostileRequestsAre400sNamingTheField) {
    const std::string user = R"("messages": [{"role": "user", "content": "q"}])";
    const std::pair<std::string, std::string> cases[] = {
        {"{oops", "not valid JSON"},
        {"{" + user + "}", "max_tokens: 'max_tokens' is required"},
        {R"({"max_tokens": 5, "messages": []})", "'messages' must be a non-empty array"},
        {R"({"max_tokens": "five", )" + user + "}", "max_tokens"},
        {R"({"max_tokens": 100000000, )" + user + "}", "max_tokens"},
        {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "q"}]})", "'role' must be user or assistant"},
        {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})", "'image' block is not supported"},
        {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}]})",
         "'tool_use' block is not supported in a user message"},
        {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})", "tool_use_id"},
        {R"({"max_tokens": 5, "thinking": {"type": "enabled"}, )" + user + "}", "'thinking' is not a field"},
        {R"({"max_tokens": 5, "tool_choice": {"type": "sometimes"}, )" + user + "}", "tool_choice"},
        {R"({"max_tokens": 5, "tools": [{"description": "x"}], )" + user + "}", "needs a 'name'"},
        {R"({"max_tokens": 5, "temperature": 9, )" + user + "}", "temperature"},
        {R"({"max_tokens": 5, "system": 3, )" + user + "}", "'content' must be a string or an array"},
    };
    for (const auto& [body, expected] : cases) {
        const std::string error = anthropic_error_of(body);
        EXPECT_NE(error.find(expected), std::string::npos) << body << "\ngave: " << error;
    }
}

}  // namespace
}  // namespace tessera
