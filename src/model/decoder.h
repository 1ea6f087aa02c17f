// What the generation loop needs from a model, wherever it runs: feed tokens
// at positions, get the logits of the last one. A single process implements
// it with LocalDecoder; distributed plans implement it over the network.
#pragma once

#include "model/hparams.h"

#include "util/error.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

// One sequence's tokens in a multi-sequence eval (continuous batching).
struct SeqEval {
    int seq = 0;
    int pos = 0;
    std::span<const int32_t> tokens;
    bool all = false;  // the logits of every token (as eval_all), not only the last one's
};

// Which logits a caller reads of the next evals (a sampler's top-k, and the
// tokens its penalties and biases change): a plan whose logits cross a wire
// may then send only those. Each row keeps the exact logits of `tokens` and
// of at least the top_k largest (ties: the lower id) among the other tokens;
// the others may come back as -inf. A sampler whose chain starts with the
// top-k of the penalized logits draws the same token from such a row as
// from the whole one: a token outside `tokens` among the top_k after the
// penalties is among the top_k of its own logits.
struct LogitsNeed {
    int top_k = 0;                // 1..kMaxTopK
    std::vector<int32_t> tokens;  // sorted, each once
    static constexpr int kMaxTopK = 4096;
    static constexpr size_t kMaxTokens = size_t{1} << 16;
};

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual const ModelHParams& hparams() const = 0;
    virtual int n_ctx() const = 0;
    // Runs tokens at positions [pos, pos + tokens.size()) and returns the
    // logits (n_vocab floats) of the last one; valid until the next call.
    virtual const float* eval(std::span<const int32_t> tokens, int pos) = 0;
    // Like eval, but returns the logits of every position: tokens.size() rows
    // of n_vocab floats (perplexity and KL divergence need them all); valid
    // until the next call.
    virtual const float* eval_all(std::span<const int32_t> tokens, int pos) = 0;

    // From the next eval on, rows need only hold what `need` names (null:
    // every logit, the default). The decoder copies it. Plans that compute
    // every logit where they are read ignore it.
    virtual void set_logits_need(const LogitsNeed* need) { (void)need; }

    // Sequences with a KV cache of their own (eval and eval_all use sequence 0).
    virtual int n_seq() const { return 1; }
    // Runs several sequences' tokens (each sequence at most once) through the
    // model together and returns, eval after eval, the logits of its last
    // token (or of every token, for an eval with `all`): rows of n_vocab
    // floats, valid until the next call. A decoding step's logits are the
    // bits eval gives for the same tokens alone.
    virtual const float* eval_seqs(std::span<const SeqEval> evals) {
        if (evals.size() != 1 || evals[0].seq != 0) {
            throw make_error("this plan keeps one sequence: --parallel needs a plan that batches sequences");
        }
        return evals[0].all ? eval_all(evals[0].tokens, evals[0].pos) : eval(evals[0].tokens, evals[0].pos);
    }

    // Compaction of one sequence's cache (LayerBlock::compact_context).
    virtual void compact_context(int seq, std::span<const int> kept, int n_used) {
        (void)seq, (void)kept, (void)n_used;
        throw make_error("this plan cannot shift or evict its context");
    }
    // The attention positions [0, n_used) received, summed over the whole
    // model (a plan built with ForwardConfig::track_attention).
    virtual void add_attention_mass(int seq, int n_used, int64_t* totals) {
        (void)seq, (void)n_used, (void)totals;
        throw make_error("this plan does not track attention");
    }
    // llama.cpp's context shift: positions [keep + discard, n_used) move down
    // by discard.
    void shift_context(int seq, int keep, int discard, int n_used) {
        if (keep < 0 || discard < 1 || keep + discard > n_used) {
            throw make_error("cannot shift: keep {}, discard {} of {} positions", keep, discard, n_used);
        }
        std::vector<int> kept;
        for (int p = 0; p < n_used; ++p) {
            if (p < keep || p >= keep + discard) kept.push_back(p);
        }
        compact_context(seq, kept, n_used);
    }
};

}  // namespace tessera
