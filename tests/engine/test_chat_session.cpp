// A conversation on a decoder: the second turn evaluates only the tokens the
// KV cache lacks, and answers exactly as a fresh session given the same
// messages does; a full context is a clear error, or with context shift the
// oldest messages give way; control tokens of the rendered prompt are parsed
// as special.
#include "engine/chat_session.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/vocab.h"
#include "test_errors.h"
#include "test_paths.h"

#include <gtest/gtest.h>

namespace tessera {

namespace {

struct Fixture {
    LlamaModel model{test::stories260k()};
    std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    std::unique_ptr<LocalDecoder> decoder;
    explicit Fixture(int n_ctx = 256) {
        config.n_ctx = n_ctx;
        decoder = std::make_unique<LocalDecoder>(model, config, 1);
    }
};

GenerationParams chat_greedy(int n) {
    GenerationParams p;
    p.n_predict = n;
    p.sampler.temperature = 0.0f;
    return p;
}

}  // namespace

TEST(ChatSession, LaterTurnsReuseTheCacheAndAnswerAsAFreshSession) {
    Fixture f;
    ChatSession chat(*f.decoder, *f.tokenizer, ChatTemplate(chatml_template()), "You tell stories.");
    const ChatTurn first = chat.reply("Once upon a time", chat_greedy(12));
    EXPECT_EQ(first.n_reused, 0);
    ASSERT_EQ(first.generation.tokens.size(), 12u);
    const ChatTurn second = chat.reply("What happened next?", chat_greedy(12));
    // Everything before the new message came from the cache.
    EXPECT_GE(second.n_reused, first.n_prompt + 11 - 2);
    EXPECT_LT(second.generation.n_evaluated_prompt, second.n_prompt / 2);

    Fixture g;
    ChatSession fresh(*g.decoder, *g.tokenizer, ChatTemplate(chatml_template()), "You tell stories.");
    nlohmann::json messages = chat.messages();
    messages.erase(messages.end() - 2, messages.end());  // the second exchange
    fresh.set_messages(messages);
    const ChatTurn again = fresh.reply("What happened next?", chat_greedy(12));
    EXPECT_EQ(again.n_reused, 0);
    EXPECT_EQ(again.generation.tokens, second.generation.tokens);
    EXPECT_EQ(chat.messages().size(), 5u);  // system, user, assistant, user, assistant
    chat.clear();
    EXPECT_EQ(chat.messages().size(), 1u);
}

TEST(ChatSession, FullContextIsAClearErrorOrShiftsOutTheOldestTurns) {
    const std::string long_text(400, 'a');
    {
        Fixture f(128);
        ChatSession chat(*f.decoder, *f.tokenizer, ChatTemplate(chatml_template()));
        const std::string e = test::error_of([&] { chat.reply(long_text, chat_greedy(4)); });
        EXPECT_NE(e.find("the context holds 128"), std::string::npos) << e;
        EXPECT_TRUE(chat.messages().empty());  // the refused message is not kept
    }
    {
        Fixture f(160);
        ChatSession chat(*f.decoder, *f.tokenizer, ChatTemplate(chatml_template()), "Be brief.", true);
        for (int i = 0; i < 6; ++i) chat.reply("Tell me about the little dog and the big red ball", chat_greedy(8));
        EXPECT_EQ(chat.messages()[0]["role"], "system");
        EXPECT_LT(chat.messages().size(), 13u);  // some turns were dropped
        EXPECT_GE(chat.messages().size(), 3u);
    }
}

TEST(ChatSession, RejectsMalformedConversations) {
    Fixture f;
    ChatSession chat(*f.decoder, *f.tokenizer, ChatTemplate(chatml_template()));
    EXPECT_NE(test::error_of([&] { chat.set_messages(nlohmann::json::object()); }).find("JSON array"),
              std::string::npos);
    EXPECT_NE(test::error_of([&] { chat.set_messages(nlohmann::json::parse(R"([{"role": 1, "content": "x"}])")); })
                  .find("role"),
              std::string::npos);
}

}  // namespace tessera
