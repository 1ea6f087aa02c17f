#include "engine/generation.h"

#include "engine/speculative_decoding.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <optional>
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

namespace {
// The positions a full context of n_used keeps: the first `keep`, then half
// of the rest: the newest half (kShift), or (kEvict) all but the half of the
// evictable positions that received the least attention (ties: the older
// goes), the last evict_recent positions never evictable.
std::vector<int> positions_kept(Decoder& decoder, const GenerationParams& params, int keep, int n_used) {
    const int discard = (n_used - keep) / 2;
    std::vector<bool> dropped(static_cast<size_t>(n_used), false);
    if (params.context_full == GenerationParams::ContextFull::kShift) {
        for (int p = keep; p < keep + discard; ++p) dropped[static_cast<size_t>(p)] = true;
    } else {
        std::vector<int64_t> mass(static_cast<size_t>(n_used), 0);
        decoder.add_attention_mass(0, n_used, mass.data());
        const int evictable_end = std::max(keep, n_used - std::max(params.evict_recent, 1));
        std::vector<int> order;
        for (int p = keep; p < evictable_end; ++p) order.push_back(p);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return mass[static_cast<size_t>(a)] < mass[static_cast<size_t>(b)];
        });
        const size_t n = std::min(order.size(), static_cast<size_t>(std::max(discard, 1)));
        for (size_t i = 0; i < n; ++i) dropped[static_cast<size_t>(order[i])] = true;
    }
    std::vector<int> kept;
    for (int p = 0; p < n_used; ++p) {
        if (!dropped[static_cast<size_t>(p)]) kept.push_back(p);
    }
    if (static_cast<int>(kept.size()) == n_used) {
        throw make_error("the context of {} is full and nothing can be evicted (--keep and --evict-recent hold it all)",
                         n_used);
    }
    return kept;
}
}  // namespace

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
    if (params.constraint != nullptr) {
        sampler.set_constraint(params.constraint);
        // The tokens this generation can take: its own limit, and the
        // context's room when a full context stops it.
        int budget = params.n_predict;
        if (params.context_full == GenerationParams::ContextFull::kStop) {
            const int room = n_ctx - static_cast<int>(prompt_tokens.size());
            budget = budget < 0 ? room : std::min(budget, room);
        }
        params.constraint->set_budget(budget);
    }

    const Vocab& vocab = tokenizer.vocab();
    // Text starts fresh when the prompt is nothing but BOS: SentencePiece's
    // dummy-prefix space then belongs to no word and is dropped.
    const bool at_text_start = prompt_tokens.size() == 1 && prompt_tokens[0] == vocab.bos_id;
    StreamDecoder stream(tokenizer, at_text_start, params.render_special);
    auto emit = [&](const std::string& piece) {
        if (piece.empty()) return;
        result.text += piece;
        if (on_text) on_text(piece);
    };

    // A plan whose logits cross a wire sends only those the sampler reads,
    // when it reads few (model/decoder.h); logprobs and speculative
    // verification read them all.
    const bool sparse = !params.on_token && params.drafter == nullptr;
    LogitsNeed need;
    const auto tell_need = [&] {
        if (sparse) decoder.set_logits_need(sampler.logits_need(n_vocab, need) ? &need : nullptr);
    };
    struct NeedReset {
        Decoder& decoder;
        ~NeedReset() { decoder.set_logits_need(nullptr); }
    } need_reset{decoder};
    tell_need();

    const int n_past = std::clamp(params.n_past, 0, static_cast<int>(prompt_tokens.size()) - 1);
    result.n_evaluated_prompt = static_cast<int>(prompt_tokens.size()) - n_past;
    const double t0 = now_seconds();
    const float* logits =
        decoder.eval(std::span<const int32_t>(prompt_tokens).subspan(static_cast<size_t>(n_past)), n_past);
    const double t1 = now_seconds();
    result.prompt_seconds = t1 - t0;

    int pos = static_cast<int>(prompt_tokens.size());  // tokens in the decoder's cache
    result.stop_reason = "length";
    // Takes a sampled token into the answer; false when generation stops at it.
    const auto take = [&](int32_t token, const float* from) {
        sampler.accept(token);
        if (params.constraint != nullptr) params.constraint->accept(token);
        if (params.on_token) params.on_token(token, from, n_vocab);
        result.tokens.push_back(token);
        if (params.stop_at_eos && vocab.is_eog(token)) {
            result.stop_reason = "eos";
            return false;
        }
        emit(stream.push(token));
        if (params.constraint != nullptr && params.constraint->finished()) {
            result.stop_reason = "grammar";
            return false;
        }
        return params.n_predict < 0 || static_cast<int>(result.tokens.size()) < params.n_predict;
    };
    const auto cancelled = [&] {
        if (params.cancel == nullptr || !params.cancel->load()) return false;
        result.stop_reason = "cancelled";
        return true;
    };
    std::optional<SpeculativeDecoding> speculative;
    if (params.drafter != nullptr) {
        speculative.emplace(*params.drafter, params.draft_min, params.draft_max, params.draft_ahead, prompt_tokens);
    }
    // Before a token is evaluated at `pos`: true when the context is full and
    // generation stops; with kShift, makes room instead.
    const bool has_bos = prompt_tokens[0] == vocab.bos_id;
    const auto context_full = [&] {
        if (pos < n_ctx) return false;
        if (params.context_full == GenerationParams::ContextFull::kStop) {
            result.stop_reason = "context";
            return true;
        }
        const int keep = std::clamp(params.n_keep + (has_bos ? 1 : 0), 0, pos - 2);
        const std::vector<int> kept = positions_kept(decoder, params, keep, pos);
        decoder.compact_context(0, kept, pos);
        if (speculative) {
            std::vector<int32_t>& context = speculative->context();
            std::vector<int32_t> moved;
            for (int p : kept) moved.push_back(context[static_cast<size_t>(p)]);
            moved.insert(moved.end(), context.begin() + pos, context.end());
            context = std::move(moved);
        }
        pos = static_cast<int>(kept.size());
        ++result.shifts;
        return false;
    };
    const auto stop_now = [&] { return context_full() || cancelled(); };
    const SpeculativeDecoding::Loop loop{take, stop_now, n_ctx, params.n_predict};
    for (;;) {
        if (cancelled()) break;
        int32_t token = sampler.sample(logits, n_vocab);
        if (!take(token, logits)) break;
        if (context_full()) break;
        // Speculative steps (engine/speculative_decoding.h) until a draft
        // comes up short; then a plain step.
        if (speculative && !speculative->run(decoder, sampler, token, pos, result, loop)) break;
        // A plain step: the pending token alone.
        const int32_t next[1] = {token};
        tell_need();
        logits = decoder.eval(next, pos);
        ++result.traversals;
        ++pos;
    }
    emit(stream.flush());
    result.generation_seconds = now_seconds() - t1;
    return result;
}

}  // namespace tessera
