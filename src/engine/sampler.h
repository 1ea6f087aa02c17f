// Picks the next token from logits. The chain follows llama.cpp's default
// order: repetition penalty, top-k, top-p, min-p, temperature, then a draw.
// Temperature <= 0 is greedy (argmax after the penalty). The same seed gives
// the same sequence of draws on every platform.
#pragma once

#include "model/decoder.h"
#include "util/rng.h"

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace tessera {

class GrammarConstraint;

struct SamplerParams {
    float temperature = 0.8f;
    int top_k = 40;           // <= 0: off
    float top_p = 0.95f;      // >= 1: off
    float min_p = 0.05f;      // <= 0: off
    float repeat_penalty = 1.0f;  // 1: off
    // OpenAI's penalties, as llama.cpp applies them over the same window:
    // logit -= presence * (count > 0) + frequency * count.
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int repeat_last_n = 64;
    uint64_t seed = 0;
    // OpenAI's logit_bias: added to a token's logit before everything else
    // (-100 bans a token in practice, +100 all but forces it).
    std::vector<std::pair<int32_t, float>> logit_bias;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& params);

    // Chooses a token from n_vocab logits (which are not modified).
    int32_t sample(const float* logits, int32_t n_vocab);

    // Speculative decoding: the token to emit where a draft proposed `draft`
    // and the target gave `logits`. Greedy: the argmax (accepted when it is
    // the draft). Sampling: the draft with probability p(draft), else a draw
    // from p without it, so the token follows p exactly; *accepted says which.
    int32_t verify(const float* logits, int32_t n_vocab, int32_t draft, bool* accepted);

    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    // The distribution the next token is drawn from, after the whole chain:
    // candidates with probabilities summing to 1 (greedy: the argmax alone).
    // Valid until the next call.
    const std::vector<Candidate>& distribution(const float* logits, int32_t n_vocab);

    // A grammar the tokens must follow (engine/grammar_constraint.h), or
    // none. sample() first draws as if unconstrained and keeps the token when
    // the grammar allows it, else draws again from the allowed tokens alone:
    // the same distribution as masking first (a token t comes out with
    // p(t) + P(refused) p(t) / P(allowed) = p(t) / P(allowed)), without the
    // mask's cost on most steps. The caller feeds generated tokens to the
    // constraint (GrammarConstraint::accept).
    void set_constraint(GrammarConstraint* constraint) { constraint_ = constraint; }

    // Which logits the next sample() reads (model/decoder.h): greedy, the
    // argmax; a top-k chain, its k; with the tokens the penalties and
    // logit_bias change. False when it reads them all: top-k off or above
    // LogitsNeed::kMaxTopK, or a grammar (its mask may reach any token).
    bool logits_need(int32_t n_vocab, LogitsNeed& need) const;

    // Records a token of the context (prompt or generated) for the repetition penalty.
    void accept(int32_t token);

    // Index of the largest logit; NaN logits never win.
    static int32_t argmax(const float* logits, int32_t n_vocab);

private:
    // A draw from candidates whose p sum to total (greedy: the first, no draw).
    int32_t draw_from(const std::vector<Candidate>& candidates, double total);

    SamplerParams params_;
    Rng rng_;
    std::deque<int32_t> recent_;
    std::vector<Candidate> candidates_, residual_;
    std::vector<int32_t> order_;  // the whole vocabulary's order, when no top-k cuts it
    std::vector<uint64_t> order_scratch_;
    std::vector<float> penalized_;
    GrammarConstraint* constraint_ = nullptr;
    const std::vector<uint64_t>* mask_ = nullptr;  // allowed tokens, while sampling under a constraint
};

}  // namespace tessera
