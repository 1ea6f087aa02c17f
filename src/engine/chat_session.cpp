#include "engine/chat_session.h"

#include "util/error.h"

#include <algorithm>

namespace tessera {

ChatSession::ChatSession(Decoder& decoder, const Tokenizer& tokenizer, ChatTemplate chat_template, std::string system,
                         bool context_shift)
    : decoder_(decoder),
      tokenizer_(tokenizer),
      template_(std::move(chat_template)),
      system_(std::move(system)),
      context_shift_(context_shift) {
    clear();
}

void ChatSession::clear() {
    messages_ = nlohmann::json::array();
    if (!system_.empty()) messages_.push_back({{"role", "system"}, {"content", system_}});
}

void ChatSession::set_messages(const nlohmann::json& messages) {
    if (!messages.is_array()) throw make_error("a conversation is a JSON array of messages");
    for (const auto& m : messages) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
            !m["content"].is_string()) {
            throw make_error("every message needs a string \"role\" and \"content\"");
        }
    }
    messages_ = messages;
    cache_.clear();
}

namespace {
std::string special_text(const Vocab& v, int32_t id) { return v.is_valid(id) ? v.tokens[static_cast<size_t>(id)] : ""; }
}  // namespace

std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tokenizer, const RenderedPrompt& rendered) {
    const Vocab& v = tokenizer.vocab();
    // The template writes its own BOS where the model wants one; the
    // tokenizer's is added only when it did not.
    std::vector<int32_t> tokens = tokenizer.encode(rendered.text, true, rendered.input);
    if (tokens.size() >= 2 && v.add_bos && tokens[0] == v.bos_id && tokens[1] == v.bos_id) tokens.erase(tokens.begin());
    return tokens;
}

std::vector<int32_t> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                        const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) {
    const Vocab& v = tokenizer.vocab();
    return chat_prompt_tokens(tokenizer, chat_template.render_prompt(messages, true, special_text(v, v.bos_id),
                                                                     special_text(v, v.eos_id), extra));
}

std::vector<int32_t> ChatSession::prompt_tokens() const {
    const Vocab& v = tokenizer_.vocab();
    return chat_prompt_tokens(tokenizer_,
                              template_.render_prompt(messages_, true, special_text(v, v.bos_id), special_text(v, v.eos_id)));
}

ChatTurn ChatSession::reply(const std::string& user_text, const GenerationParams& params,
                            const std::function<void(const std::string&)>& on_text) {
    messages_.push_back({{"role", "user"}, {"content", user_text}});
    ChatTurn turn;
    std::vector<int32_t> tokens = prompt_tokens();
    const int n_ctx = decoder_.n_ctx();
    // Room for an answer of at least a few tokens.
    const auto fits = [&] { return static_cast<int64_t>(tokens.size()) + 8 <= n_ctx; };
    while (!fits() && context_shift_) {
        // The oldest exchange after the system message goes.
        const size_t first = !messages_.empty() && messages_[0]["role"] == "system" ? 1 : 0;
        if (messages_.size() <= first + 1) break;
        messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first));
        ++turn.n_dropped;
        tokens = prompt_tokens();
    }
    if (!fits()) {
        messages_.erase(messages_.end() - 1);
        throw make_error("the conversation is {} tokens and the context holds {}: /clear it, start with a larger -c, "
                         "or use --context-shift",
                         tokens.size(), n_ctx);
    }
    GenerationParams p = params;
    if (p.n_predict < 0 || p.n_predict > n_ctx - static_cast<int>(tokens.size())) {
        p.n_predict = n_ctx - static_cast<int>(tokens.size());
    }
    turn.generation = cache_.generate(decoder_, tokenizer_, tokens, p, on_text);
    turn.n_prompt = static_cast<int>(tokens.size());
    turn.n_reused = static_cast<int>(tokens.size()) - turn.generation.n_evaluated_prompt;
    messages_.push_back({{"role", "assistant"}, {"content", turn.generation.text}});
    return turn;
}

}  // namespace tessera
