// The OpenAI request parser alone (no server, no model): a body is hostile
// input, every field is checked for type and range, and an error is a 400
// naming the field, as OpenAI's API answers.
#include "serve/openai_api.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

ApiError error_of(const std::string& body, bool chat) {
    try {
        parse_completion_request(body, chat);
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
}

TEST(OpenAiRequest, ChatFieldsAreRead) {
    const CompletionRequest r = parse_completion_request(
        R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3, "stop": ["\n", "END"], "stream": true,
            "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2,
            "presence_penalty": 0.5, "frequency_penalty": -0.5, "logit_bias": {"42": -100}})",
        true);
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[1]["content"], "Hi");
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.temperature, 0.5f);
    EXPECT_EQ(r.seed, 3u);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(r.top_logprobs, 2);
    ASSERT_EQ(r.logit_bias.size(), 1u);
    EXPECT_EQ(r.logit_bias[0].first, 42);
}

TEST(OpenAiRequest, CompletionsTakeAStringPrompt) {
    const CompletionRequest r = parse_completion_request(R"({"prompt": "<|im_start|>user", "logprobs": 3})", false);
    EXPECT_FALSE(r.chat);
    EXPECT_EQ(r.prompt, "<|im_start|>user");
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(error_of(R"({"prompt": 5})", false).param, "prompt");
}

TEST(OpenAiRequest, EveryBadFieldIsA400NamingIt) {
    const std::pair<const char*, const char*> cases[] = {
        {"not json", ""},
        {"[1, 2]", ""},
        {R"({"messages": []})", "messages"},
        {R"({"messages": [{"content": "x"}]})", "messages"},
        {R"({"messages": [{"role": "user", "content": 5}]})", "messages"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "9"})", "max_completion_tokens"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_p": -1})", "top_p"},
        {R"({"messages": [{"role": "user", "content": "x"}], "seed": 1.5})", "seed"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]})", "stop"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})", "stop"},
        {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "n"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "stream"},
        {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs"},
        {R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"x": 1}})", "logit_bias"},
        {R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 101}})", "logit_bias"},
        {R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 9})", "presence_penalty"},
        // Found by the request fuzzer's first cases: a mistyped part or
        // option threw a JSON type error instead of a 400.
        {R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})", "messages"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": "yes"}})", "stream_options"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": 1})", "stream_options"},
    };
    for (const auto& [body, param] : cases) {
        const ApiError e = error_of(body, true);
        EXPECT_EQ(e.status, 400) << body;
        EXPECT_EQ(e.param, param) << body;
        EXPECT_FALSE(e.message.empty()) << body;
        EXPECT_EQ(e.body()["error"]["type"], "invalid_request_error") << body;
    }
}

// Token bytes that are part of a character come out as U+FFFD, never as a
// JSON error.
TEST(OpenAiRequest, ResponsesWithBrokenUtf8StillSerialize) {
    EXPECT_EQ(dump_json(nlohmann::json{{"t", std::string("a\xE2\x96")}}), "{\"t\":\"a\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace tessera
