#include "eval/logit_agreement.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

ForcedRun run(Decoder& decoder, std::span<const int32_t> prompt, std::span<const int32_t> forced, int positions) {
    const int n_vocab = decoder.hparams().n_vocab;
    if (prompt.empty() || static_cast<int64_t>(prompt.size()) + positions > decoder.n_ctx()) {
        throw make_error("a prompt of {} tokens and {} positions after it do not fit the context of {}", prompt.size(),
                         positions, decoder.n_ctx());
    }
    ForcedRun r;
    const float* logits = decoder.eval(prompt, 0);
    int pos = static_cast<int>(prompt.size());
    for (int i = 0; i < positions; ++i) {
        r.logits.insert(r.logits.end(), logits, logits + n_vocab);
        const int32_t next = forced.empty() ? static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits)
                                            : forced[static_cast<size_t>(i)];
        r.tokens.push_back(next);
        if (i + 1 < positions) logits = decoder.eval(std::span<const int32_t>(&r.tokens.back(), 1), pos++);
    }
    return r;
}

}  // namespace

ForcedRun greedy_run(Decoder& decoder, std::span<const int32_t> prompt, int positions) {
    return run(decoder, prompt, {}, positions);
}

ForcedRun forced_run(Decoder& decoder, std::span<const int32_t> prompt, std::span<const int32_t> tokens) {
    if (tokens.empty()) throw make_error("internal: no tokens to force");
    return run(decoder, prompt, tokens, static_cast<int>(tokens.size()));
}

LogitAgreement compare_logits(std::span<const float> reference, std::span<const float> other, int n_vocab) {
    if (n_vocab < 1 || reference.size() != other.size() || reference.size() % static_cast<size_t>(n_vocab) != 0) {
        throw make_error("internal: comparing {} and {} logits of rows of {}", reference.size(), other.size(), n_vocab);
    }
    LogitAgreement a;
    a.positions = static_cast<int>(reference.size() / static_cast<size_t>(n_vocab));
    int same = 0;
    std::vector<double> lp(static_cast<size_t>(n_vocab)), lq(lp.size());
    for (int r = 0; r < a.positions; ++r) {
        const float* p = reference.data() + static_cast<size_t>(r) * n_vocab;
        const float* q = other.data() + static_cast<size_t>(r) * n_vocab;
        // Log-softmax of each in double.
        const auto log_softmax = [n_vocab](const float* x, std::vector<double>& out) {
            const double m = *std::max_element(x, x + n_vocab);
            double sum = 0.0;
            for (int i = 0; i < n_vocab; ++i) sum += std::exp(x[i] - m);
            const double log_z = m + std::log(sum);
            for (int i = 0; i < n_vocab; ++i) out[static_cast<size_t>(i)] = x[i] - log_z;
        };
        log_softmax(p, lp);
        log_softmax(q, lq);
        double kl = 0.0;
        for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
        a.kl_mean += kl;
        a.kl_max = std::max(a.kl_max, kl);
        same += (std::max_element(p, p + n_vocab) - p) == (std::max_element(q, q + n_vocab) - q) ? 1 : 0;
    }
    a.kl_mean /= a.positions;
    a.top1 = static_cast<double>(same) / a.positions;
    return a;
}

}  // namespace tessera
