#include "engine/sampler.h"

#include "engine/grammar_constraint.h"
#include "engine/logit_order.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

void Sampler::accept(int32_t token) {
    if (params_.repeat_last_n <= 0) return;
    recent_.push_back(token);
    while (recent_.size() > static_cast<size_t>(params_.repeat_last_n)) recent_.pop_front();
}

int32_t Sampler::argmax(const float* logits, int32_t n_vocab) {
    int32_t best = 0;
    float best_value = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n_vocab; ++i) {
        if (logits[i] > best_value) {  // false for NaN, so NaN never wins
            best_value = logits[i];
            best = i;
        }
    }
    return best;
}

bool Sampler::logits_need(int32_t n_vocab, LogitsNeed& need) const {
    if (constraint_ != nullptr) return false;
    if (params_.temperature <= 0.0f) {
        need.top_k = 1;
    } else if (params_.top_k > 0 && params_.top_k <= LogitsNeed::kMaxTopK) {
        need.top_k = params_.top_k;
    } else {
        return false;
    }
    // distribution() changes these tokens' logits before its top-k: the
    // rest keep their own order, so each is among the top-k after the
    // changes only if among the top-k of the unchanged.
    need.tokens.clear();
    const bool penalties =
        params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    if (penalties) need.tokens.assign(recent_.begin(), recent_.end());
    for (const auto& [token, bias] : params_.logit_bias) need.tokens.push_back(token);
    // Out of the vocabulary: distribution() skips them too.
    std::erase_if(need.tokens, [&](int32_t t) { return t < 0 || t >= n_vocab; });
    std::sort(need.tokens.begin(), need.tokens.end());
    need.tokens.erase(std::unique(need.tokens.begin(), need.tokens.end()), need.tokens.end());
    return need.tokens.size() <= LogitsNeed::kMaxTokens;
}

const std::vector<Sampler::Candidate>& Sampler::distribution(const float* logits, int32_t n_vocab) {
    const float* x = logits;
    const bool penalties =
        params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    const bool penalize = penalties && !recent_.empty();
    if (penalize || !params_.logit_bias.empty() || mask_ != nullptr) {
        penalized_.assign(logits, logits + n_vocab);
        if (mask_ != nullptr) {
            constexpr float kRefused = -std::numeric_limits<float>::infinity();
            for (int32_t i = 0; i < n_vocab; ++i) {
                if ((((*mask_)[static_cast<size_t>(i) >> 6] >> (static_cast<unsigned>(i) & 63)) & 1) == 0) {
                    penalized_[static_cast<size_t>(i)] = kRefused;
                }
            }
        }
        for (const auto& [token, bias] : params_.logit_bias) {
            if (token >= 0 && token < n_vocab) penalized_[static_cast<size_t>(token)] += bias;
        }
        x = penalized_.data();
    }
    if (penalize) {
        // Each distinct recent token is penalized once, as in llama.cpp;
        // the frequency penalty scales with its count.
        std::vector<int32_t> seen(recent_.begin(), recent_.end());
        std::sort(seen.begin(), seen.end());
        for (size_t i = 0; i < seen.size();) {
            const int32_t t = seen[i];
            size_t count = 0;
            while (i < seen.size() && seen[i] == t) ++i, ++count;
            if (t < 0 || t >= n_vocab) continue;
            float& l = penalized_[static_cast<size_t>(t)];
            l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
            l -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
        }
        x = penalized_.data();
    }
    candidates_.clear();
    if (params_.temperature <= 0.0f) {
        candidates_.push_back({argmax(x, n_vocab), 0.0f, 1.0f});
        return candidates_;
    }

    auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    if (params_.top_k > 0) {
        for (int32_t i = 0; i < n_vocab; ++i) {
            // A refused token (-inf) never enters; NaN never does either.
            if (x[i] > -std::numeric_limits<float>::infinity()) candidates_.push_back({i, x[i], 0.0f});
        }
    }
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), by_logit);
        candidates_.resize(static_cast<size_t>(params_.top_k));
    } else {
        // The whole vocabulary, the same entries in the same order by a radix
        // sort (logit_order.h), which leaves out the refused tokens itself.
        order_by_logit(x, n_vocab, order_, order_scratch_);
        candidates_.resize(order_.size());
        for (size_t i = 0; i < order_.size(); ++i) {
            const int32_t id = order_[i];
            candidates_[i] = {id, x[id], 0.0f};
        }
    }
    if (candidates_.empty()) {
        candidates_.push_back({0, 0.0f, 1.0f});  // every logit NaN: token 0, as before
        return candidates_;
    }

    auto normalize = [&](float temperature) {
        const float max = candidates_.front().logit;
        double sum = 0.0;
        for (auto& c : candidates_) {
            c.p = std::exp((c.logit - max) / temperature);
            sum += c.p;
        }
        for (auto& c : candidates_) c.p = static_cast<float>(c.p / sum);
    };

    // The probabilities at temperature 1 are read only by top-p and min-p.
    if (params_.top_p < 1.0f || params_.min_p > 0.0f) normalize(1.0f);
    if (params_.top_p < 1.0f) {
        double cumulative = 0.0;
        size_t keep = candidates_.size();
        for (size_t i = 0; i < candidates_.size(); ++i) {
            cumulative += candidates_[i].p;
            if (cumulative >= params_.top_p) {
                keep = i + 1;
                break;
            }
        }
        candidates_.resize(keep);
    }
    if (params_.min_p > 0.0f) {
        const float threshold = candidates_.front().p * params_.min_p;
        size_t keep = 1;
        while (keep < candidates_.size() && candidates_[keep].p >= threshold) ++keep;
        candidates_.resize(keep);
    }

    normalize(params_.temperature);
    return candidates_;
}

int32_t Sampler::draw_from(const std::vector<Candidate>& candidates, double total) {
    if (params_.temperature <= 0.0f) return candidates[0].id;  // greedy: no random number used
    const float r = rng_.next_float() * static_cast<float>(total);
    float cumulative = 0.0f;
    for (const auto& c : candidates) {
        cumulative += c.p;
        if (r < cumulative) return c.id;
    }
    return candidates.back().id;
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
    if (constraint_ != nullptr && !constraint_->closing()) {
        const int32_t token = draw_from(distribution(logits, n_vocab), 1.0);
        if (constraint_->allows(token)) return token;
    }
    if (constraint_ != nullptr) mask_ = &constraint_->allowed();
    const int32_t token = draw_from(distribution(logits, n_vocab), 1.0);
    mask_ = nullptr;
    return token;
}

int32_t Sampler::verify(const float* logits, int32_t n_vocab, int32_t draft, bool* accepted) {
    // Under a grammar the draft is verified against the allowed tokens alone.
    if (constraint_ != nullptr) mask_ = &constraint_->allowed();
    const std::vector<Candidate>& d = distribution(logits, n_vocab);
    mask_ = nullptr;
    if (params_.temperature <= 0.0f) {  // greedy: the draft stands when it is the argmax
        *accepted = d[0].id == draft;
        return d[0].id;
    }
    // A deterministic proposal (q one-hot at `draft`): accept with
    // probability p(draft), else draw from p without it, renormalized. The
    // token then follows p exactly: p(draft) * 1 for the draft, and for any
    // other x, (1 - p(draft)) * p(x) / (1 - p(draft)) = p(x).
    double p_draft = 0.0;
    for (const auto& c : d) {
        if (c.id == draft) p_draft = c.p;
    }
    if (p_draft > 0.0 && static_cast<double>(rng_.next_float()) < p_draft) {
        *accepted = true;
        return draft;
    }
    *accepted = false;
    residual_.clear();
    for (const auto& c : d) {
        if (c.id != draft) residual_.push_back(c);
    }
    if (residual_.empty()) return draft;  // p(draft) = 1 but the draw missed by rounding
    return draw_from(residual_, 1.0 - p_draft);
}

}  // namespace tessera
