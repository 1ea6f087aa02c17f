#include "engine/generation.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <span>

namespace tessera {

std::vector<int32_t> tokenize_prompt(const Tokenizer& tokenizer, const std::string& prompt, int n_ctx) {
    std::vector<int32_t> tokens = tokenizer.encode(prompt, true);
    if (tokens.empty()) throw make_error("the prompt is empty and the vocabulary has no BOS token to start from");
    if (static_cast<int64_t>(tokens.size()) >= n_ctx) {
        throw make_error("the prompt is {} tokens but the context holds {} (leave room for at least one generated "
                         "token, or raise -c)",
                         tokens.size(), n_ctx);
    }
    return tokens;
}

GenerationResult generate(Decoder& decoder, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_tokens,
                          const GenerationParams& params, const std::function<void(const std::string&)>& on_text) {
    const int n_ctx = decoder.n_ctx();
    const int32_t n_vocab = decoder.hparams().n_vocab;
    if (prompt_tokens.empty()) throw make_error("internal: generate with no prompt tokens");
    if (static_cast<int64_t>(prompt_tokens.size()) >= n_ctx) {
        throw make_error("the prompt is {} tokens but the context holds {}", prompt_tokens.size(), n_ctx);
    }
    GenerationResult result;
    result.prompt_tokens = prompt_tokens;
    Sampler sampler(params.sampler);
    for (int32_t t : prompt_tokens) sampler.accept(t);

    const Vocab& vocab = tokenizer.vocab();
    // Text starts fresh when the prompt is nothing but BOS: SentencePiece's
    // dummy-prefix space then belongs to no word and is dropped.
    const bool at_text_start = prompt_tokens.size() == 1 && prompt_tokens[0] == vocab.bos_id;
    StreamDecoder stream(tokenizer, at_text_start);
    auto emit = [&](const std::string& piece) {
        if (piece.empty()) return;
        result.text += piece;
        if (on_text) on_text(piece);
    };

    const int n_past = std::clamp(params.n_past, 0, static_cast<int>(prompt_tokens.size()) - 1);
    result.n_evaluated_prompt = static_cast<int>(prompt_tokens.size()) - n_past;
    const double t0 = now_seconds();
    const float* logits =
        decoder.eval(std::span<const int32_t>(prompt_tokens).subspan(static_cast<size_t>(n_past)), n_past);
    const double t1 = now_seconds();
    result.prompt_seconds = t1 - t0;

    int pos = static_cast<int>(prompt_tokens.size());
    result.stop_reason = "length";
    for (int i = 0; params.n_predict < 0 || i < params.n_predict; ++i) {
        if (params.cancel != nullptr && params.cancel->load()) {
            result.stop_reason = "cancelled";
            break;
        }
        const int32_t token = sampler.sample(logits, n_vocab);
        sampler.accept(token);
        if (params.on_token) params.on_token(token, logits, n_vocab);
        result.tokens.push_back(token);
        if (params.stop_at_eos && vocab.is_eog(token)) {
            result.stop_reason = "eos";
            break;
        }
        emit(stream.push(token));
        const bool last = params.n_predict >= 0 && i + 1 >= params.n_predict;
        if (last) break;
        if (pos >= n_ctx) {
            result.stop_reason = "context";
            break;
        }
        const int32_t next[1] = {token};
        logits = decoder.eval(next, pos);
        ++pos;
    }
    emit(stream.flush());
    result.generation_seconds = now_seconds() - t1;
    return result;
}

}  // namespace tessera
