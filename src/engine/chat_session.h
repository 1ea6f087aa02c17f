// A conversation held on a Decoder: messages, rendered by the model's chat
// template into a prompt whose control tokens are parsed as special, and the
// tokens the decoder's KV cache already holds. Each turn evaluates only what
// the cache lacks (the template re-renders earlier turns as they were, so the
// new prompt begins with the cached tokens) and generates until an
// end-of-generation token. Used by `tessera chat` (and by serve's slots).
#pragma once

#include "chat/chat_template.h"
#include "engine/generation.h"
#include "engine/prefix_cache.h"
#include "model/decoder.h"
#include "model/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

// The tokens of a prompt a chat template rendered: the control tokens the
// template wrote parsed as special (never one inside a message's text, which
// stays the text it is, as OpenAI's API treats it), BOS added only where the
// template did not write one itself.
std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tokenizer, const RenderedPrompt& rendered);
// Renders `messages` with an assistant turn to fill, as chat_prompt_tokens.
// `extra`: further template variables (the request's tools).
std::vector<int32_t> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                        const nlohmann::ordered_json& messages,
                                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

struct ChatTurn {
    GenerationResult generation;
    int n_prompt = 0;    // tokens of the whole rendered conversation
    int n_reused = 0;    // of them, taken from the KV cache
    int n_dropped = 0;   // messages dropped by a context shift this turn
};

class ChatSession {
public:
    // context_shift: when the conversation no longer fits, drop its oldest
    // messages (after the system message) until it does; otherwise a full
    // context is an Error saying so.
    ChatSession(Decoder& decoder, const Tokenizer& tokenizer, ChatTemplate chat_template, std::string system = "",
                bool context_shift = false);

    // Adds the user's message, answers it (streaming the text to on_text),
    // and adds the answer to the conversation. A cancelled answer is kept as
    // far as it got.
    ChatTurn reply(const std::string& user_text, const GenerationParams& params,
                   const std::function<void(const std::string&)>& on_text = {});

    // Forgets the conversation (the system message stays).
    void clear();
    const nlohmann::json& messages() const { return messages_; }
    // Replaces the conversation (an array of {"role", "content"}); the next
    // turn evaluates it afresh.
    void set_messages(const nlohmann::json& messages);

    // The prompt tokens of the conversation so far plus an assistant turn to
    // fill (exposed for tests).
    std::vector<int32_t> prompt_tokens() const;

private:
    Decoder& decoder_;
    const Tokenizer& tokenizer_;
    ChatTemplate template_;
    std::string system_;
    bool context_shift_;
    nlohmann::json messages_ = nlohmann::json::array();
    PrefixCache cache_;
};

}  // namespace tessera
