#include "eval/perplexity.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <cmath>

namespace tessera {

ChunkPlan plan_chunks(size_t n_tokens, const PerplexityParams& params) {
    if (params.n_ctx < 4) throw make_error("the context must be at least 4 tokens to score anything (got {})", params.n_ctx);
    const size_t n_ctx = static_cast<size_t>(params.n_ctx);
    if (n_tokens < n_ctx) {
        throw make_error("the text is {} tokens but one chunk needs {} (-c); use a longer text or a smaller -c",
                         n_tokens, n_ctx);
    }
    ChunkPlan plan;
    plan.n_ctx = params.n_ctx;
    plan.first = params.n_ctx / 2;
    const size_t n_chunk_max = n_tokens / n_ctx;
    plan.n_chunk = static_cast<int>(params.n_chunks < 0 ? n_chunk_max
                                                        : std::min(static_cast<size_t>(params.n_chunks), n_chunk_max));
    if (plan.n_chunk == 0) throw make_error("--chunks 0 leaves nothing to evaluate");
    return plan;
}

std::vector<int32_t> chunk_inputs(std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t bos) {
    const size_t n = static_cast<size_t>(plan.n_chunk) * static_cast<size_t>(plan.n_ctx);
    if (tokens.size() < n) throw make_error("internal: {} tokens for {} chunks of {}", tokens.size(), plan.n_chunk, plan.n_ctx);
    std::vector<int32_t> inputs(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n));
    if (bos >= 0) {
        for (int c = 0; c < plan.n_chunk; ++c) inputs[static_cast<size_t>(c) * plan.n_ctx] = bos;
    }
    return inputs;
}

double NllStats::mean_error() const {
    if (count < 2) return 0.0;
    const double m = mean();
    const double var = sum2 / static_cast<double>(count) - m * m;
    return var > 0.0 ? std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
}

double NllStats::ppl() const { return std::exp(mean()); }

double log_sum_exp(const float* logits, int64_t n) {
    float max = logits[0];
    for (int64_t i = 1; i < n; ++i) max = std::max(max, logits[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    return max + std::log(sum);
}

const float* eval_chunk(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan, int c) {
    if (decoder.n_ctx() < plan.n_ctx) {
        throw make_error("internal: a decoder context of {} cannot hold chunks of {}", decoder.n_ctx(), plan.n_ctx);
    }
    const size_t begin = static_cast<size_t>(c) * static_cast<size_t>(plan.n_ctx);
    return decoder.eval_all(inputs.subspan(begin, static_cast<size_t>(plan.n_ctx)), 0);
}

PerplexityResult compute_perplexity(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan,
                                    const std::function<void(const ChunkReport&)>& on_chunk,
                                    const ChunkLogitsFn& on_logits) {
    const int64_t n_vocab = decoder.hparams().n_vocab;
    if (inputs.size() != static_cast<size_t>(plan.n_chunk) * static_cast<size_t>(plan.n_ctx)) {
        throw make_error("internal: {} input tokens for {} chunks of {}", inputs.size(), plan.n_chunk, plan.n_ctx);
    }
    PerplexityResult result;
    result.plan = plan;
    for (int c = 0; c < plan.n_chunk; ++c) {
        const double t0 = now_seconds();
        const float* logits = eval_chunk(decoder, inputs, plan, c);
        const double seconds = now_seconds() - t0;
        const std::span<const int32_t> chunk = inputs.subspan(static_cast<size_t>(c) * plan.n_ctx, plan.n_ctx);
        if (on_logits) on_logits(c, chunk, logits);
        for (int i = plan.first; i < plan.n_ctx - 1; ++i) {
            const float* row = logits + static_cast<int64_t>(i) * n_vocab;
            const int32_t target = chunk[static_cast<size_t>(i) + 1];
            result.nll.add(log_sum_exp(row, n_vocab) - row[target]);
        }
        result.chunk_ppl.push_back(result.nll.ppl());
        if (on_chunk) on_chunk({c, plan.n_chunk, result.nll.ppl(), seconds});
    }
    return result;
}

}  // namespace tessera
