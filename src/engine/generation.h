// The generation loop: evaluate the prompt, then sample, stream and feed back
// one token at a time until the token budget, an end-of-sequence token or
// the end of the context.
#pragma once

#include "engine/drafter.h"
#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "model/decoder.h"
#include "model/tokenizer.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

struct GenerationParams {
    int n_predict = -1;  // < 0: until end of sequence or a full context
    SamplerParams sampler;
    bool stop_at_eos = true;  // stop at any end-of-generation token (Vocab::is_eog)
    // The first n_past prompt tokens are already in the decoder's KV cache at
    // their positions (a conversation's earlier turns): only the rest is
    // evaluated. (The last prompt token always is, for its logits.)
    int n_past = 0;
    // Set from another thread (or a signal handler) to stop after the current
    // token; the result then says "cancelled".
    const std::atomic<bool>* cancel = nullptr;
    // Called with each sampled token and the logits it was sampled from
    // (n_vocab floats, before any penalty), before its text is emitted: for
    // log-probabilities.
    std::function<void(int32_t token, const float* logits, int32_t n_vocab)> on_token;
    // Speculative decoding: when set, each step proposes up to draft_max
    // tokens (adapted to the running acceptance) and the decoder verifies
    // them with the step's token in one eval_all; a proposal shorter than
    // draft_min is not verified (a plain step instead). Output is unchanged:
    // greedy token for token, sampled in distribution.
    Drafter* drafter = nullptr;
    int draft_max = 8;
    int draft_min = 1;
    // Draft the next block while the model verifies one (on a thread of its
    // own; engine/speculative_decoding.h): hides drafting behind traversals
    // that wait on other nodes, and competes for this node's cores otherwise.
    bool draft_ahead = false;
    // When the context is full: stop ("context"), or make room and go on:
    // keep the first n_keep tokens (and a BOS before them) and drop half of
    // the rest, re-rotating the kept keys to their new positions. kShift
    // drops the oldest half (llama.cpp's context shift); kEvict the half that
    // received the least attention (H2O; the decoder must track attention,
    // ForwardConfig::track_attention), never the last evict_recent positions.
    enum class ContextFull { kStop, kShift, kEvict };
    ContextFull context_full = ContextFull::kStop;
    int n_keep = 0;
    int evict_recent = 32;
    // A grammar the output must follow (response_format, a tool's
    // arguments): each sampled token is one it allows, and the output is
    // closed before the token budget or the context runs out. Generation
    // ends ("grammar") when the grammar allows nothing more.
    GrammarConstraint* constraint = nullptr;
    // Control tokens appear in the text as their own text (<|channel|>):
    // for output formats read by them (gpt-oss's harmony).
    bool render_special = false;
};

struct GenerationResult {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> tokens;  // generated ids (an end-of-sequence id included if one was sampled)
    std::string text;             // generated text
    std::string stop_reason;      // "length", "eos", "context", "cancelled" or "grammar" (its text complete)
    int n_evaluated_prompt = 0;   // prompt tokens this call evaluated (the rest were cached)
    double prompt_seconds = 0.0;
    double generation_seconds = 0.0;  // from the first to the last generated token
    int traversals = 0;  // decoder evals after the prompt (a verification counts once)
    int drafted = 0;     // draft tokens verified
    int accepted = 0;    // of those, accepted
    double draft_seconds = 0.0;  // in the drafter's propose between traversals (what drafting ahead could hide)
    double draft_ahead_seconds = 0.0;  // drafting during traversals (draft_ahead): hidden when a traversal is longer
    int drafts_ahead = 0;              // traversals whose draft was made during the one before
    int shifts = 0;              // context shifts or evictions (ContextFull::kShift, kEvict)
};

// Tokenizes a prompt (with BOS when the vocabulary wants one) and checks it
// fits the context, with an Error that gives both numbers when it does not.
std::vector<int32_t> tokenize_prompt(const Tokenizer& tokenizer, const std::string& prompt, int n_ctx);

// Runs the loop. on_text receives each piece of text as soon as it is
// complete UTF-8 (it may be empty).
GenerationResult generate(Decoder& decoder, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt_tokens,
                          const GenerationParams& params, const std::function<void(const std::string&)>& on_text = {});

}  // namespace tessera
