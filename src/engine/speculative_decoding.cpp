#include "engine/speculative_decoding.h"

#include "util/timer.h"

#include <algorithm>
#include <future>

namespace tessera {

SpeculativeDecoding::SpeculativeDecoding(Drafter& drafter, int draft_min, int draft_max, bool draft_ahead,
                                         std::vector<int32_t> prompt)
    : drafter_(drafter),
      draft_min_(draft_min),
      draft_max_(draft_max),
      draft_len_(std::max(1, draft_max)),
      draft_ahead_(draft_ahead),
      context_(std::move(prompt)) {}

const float* SpeculativeDecoding::verify(Decoder& decoder, int pos, GenerationResult& result) {
    if (!draft_ahead_) return decoder.eval_all(batch_, pos);
    // The context after a draft that stands whole, and the length the next
    // draft gets then (+2), plus the guess of the model's own token.
    ahead_context_ = context_;
    ahead_context_.insert(ahead_context_.end(), draft_.begin(), draft_.end());
    const int ahead_len = std::min(draft_max_, draft_len_ + 2) + 1;
    std::future<double> drafting = std::async(std::launch::async, [&] {
        const double d0 = now_seconds();
        drafter_.propose(ahead_context_, ahead_len, ahead_);
        return now_seconds() - d0;
    });
    // The future's destructor waits for the drafter when the traversal
    // throws (a peer gone), so the drafter never outlives its inputs.
    const float* rows = decoder.eval_all(batch_, pos);
    result.draft_ahead_seconds += drafting.get();
    return rows;
}

bool SpeculativeDecoding::run(Decoder& decoder, Sampler& sampler, int32_t& token, int& pos, GenerationResult& result,
                              const Loop& loop) {
    const int32_t n_vocab = decoder.hparams().n_vocab;
    for (;;) {
        context_.push_back(token);
        int room = std::min(draft_len_, loop.n_ctx - pos - 1);
        if (loop.n_predict >= 0) room = std::min(room, loop.n_predict - static_cast<int>(result.tokens.size()));
        draft_.clear();
        // The draft made during the last traversal holds when the model's
        // token is its guess (ahead_ is empty unless that draft stood whole).
        const bool ahead_holds = ahead_.size() > 1 && ahead_[0] == token;
        if (room >= std::max(1, draft_min_)) {
            if (ahead_holds) {
                const size_t n = std::min(ahead_.size() - 1, static_cast<size_t>(room));
                draft_.assign(ahead_.begin() + 1, ahead_.begin() + 1 + static_cast<std::ptrdiff_t>(n));
                ++result.drafts_ahead;
            } else {
                const double d0 = now_seconds();
                drafter_.propose(context_, room, draft_);
                result.draft_seconds += now_seconds() - d0;
            }
        }
        ahead_.clear();
        if (draft_.empty() || static_cast<int>(draft_.size()) < draft_min_) return true;
        batch_.assign(1, token);
        batch_.insert(batch_.end(), draft_.begin(), draft_.end());
        const float* rows = verify(decoder, pos, result);
        ++result.traversals;
        result.drafted += static_cast<int>(draft_.size());
        size_t ok = 0;
        bool accepted = true;
        for (; ok < draft_.size(); ++ok) {
            token = sampler.verify(rows + ok * n_vocab, n_vocab, draft_[ok], &accepted);
            if (!loop.take(token, rows + ok * n_vocab)) return false;
            if (!accepted) break;
            context_.push_back(token);
            ++result.accepted;
        }
        // In the cache now: the step's token and the accepted drafts.
        pos += 1 + static_cast<int>(ok);
        if (accepted) {
            // Every draft stood: the last row gives one more token.
            draft_len_ = std::min(draft_max_, draft_len_ + 2);
            token = sampler.sample(rows + draft_.size() * n_vocab, n_vocab);
            if (!loop.take(token, rows + draft_.size() * n_vocab)) return false;
        } else {
            draft_len_ = std::max(std::max(1, draft_min_), draft_len_ - 1);
            ahead_.clear();  // guessed from tokens the model did not take
        }
        if (loop.stop_now()) return false;
    }
}

}  // namespace tessera
