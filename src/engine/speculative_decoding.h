// Speculative decoding over any plan (Shard's design): after each token the
// model took, a drafter (a small model of the same vocabulary, or prompt
// lookup) proposes up to draft_len more; the model evaluates the token and
// the draft in one traversal (Decoder::eval_all: one set of syncs, or one
// trip through a pipeline's stages) and the sampler verifies the draft row by
// row (Sampler::verify: greedy output unchanged token for token, sampled
// output in the model's distribution). Rejected positions stay in the cache
// to be overwritten. The draft length adapts: +2 when a whole draft stood,
// -1 when one was cut.
//
// Drafting ahead (draft_ahead): while the model verifies a draft, the
// drafter proposes the next one on a thread of its own, from the context as
// if the whole draft stands, one token longer: its first token is a guess of
// the model's own next token. When the draft stands and the model's token is
// that guess, the next traversal starts at once, its drafting hidden behind
// the one before (Shard's case: a pipeline over slow links, the root idle
// while a traversal is away). Otherwise the guess is dropped and the drafter
// proposes as usual. Verification is unchanged, and so is the output.
#pragma once

#include "engine/drafter.h"
#include "engine/generation.h"
#include "engine/sampler.h"
#include "model/decoder.h"
#include "util/function_ref.h"

#include <cstdint>
#include <vector>

namespace tessera {

class SpeculativeDecoding {
public:
    // `prompt`: the tokens already in the decoder's cache before the first step.
    SpeculativeDecoding(Drafter& drafter, int draft_min, int draft_max, bool draft_ahead, std::vector<int32_t> prompt);

    // The generation loop's side of a step.
    struct Loop {
        // Takes a token into the answer; false when generation stops at it.
        FunctionRef<bool(int32_t token, const float* logits)> take;
        // After each traversal: true when generation stops (a full context
        // with nothing to make room, or a cancel). It may compact the cache
        // (a context shift), moving context() and `pos` with it.
        FunctionRef<bool()> stop_now;
        int n_ctx = 0;
        int n_predict = -1;  // < 0: no limit
    };

    // Speculative traversals after `token`, just taken with `pos` tokens in the
    // cache. Returns false when generation stopped; true when a draft came up
    // short, with `token` the one a plain step evaluates next (at `pos`).
    bool run(Decoder& decoder, Sampler& sampler, int32_t& token, int& pos, GenerationResult& result, const Loop& loop);

    // The tokens in the cache, then the pending one: what the drafter continues.
    std::vector<int32_t>& context() { return context_; }

private:
    // The model's rows for batch_ at pos; with draft_ahead, drafts the next
    // block into ahead_ meanwhile.
    const float* verify(Decoder& decoder, int pos, GenerationResult& result);

    Drafter& drafter_;
    int draft_min_;
    int draft_max_;
    int draft_len_;
    bool draft_ahead_;
    std::vector<int32_t> context_, draft_, batch_;
    // Drafted during the last traversal: the guess of the model's next
    // token, then the next draft (empty unless the last draft stood whole).
    std::vector<int32_t> ahead_, ahead_context_;
};

}  // namespace tessera
