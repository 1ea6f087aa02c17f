#include "cluster/sp_chunks.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>

namespace tessera {

std::vector<PromptChunk> plan_prompt_chunks(int pos0, int n_tok, int n_batch, std::span<const double> weights) {
    if (pos0 < 0 || n_tok < 1 || n_batch < 1 || weights.empty()) {
        throw make_error("internal: chunks of {} positions at {} in batches of {} for {} nodes", n_tok, pos0, n_batch,
                         weights.size());
    }
    double total = 0.0;
    for (const double w : weights) {
        if (!(w > 0.0)) throw make_error("internal: a node weight of {}", w);
        total += w;
    }
    const int n_batches = (n_tok + n_batch - 1) / n_batch;
    std::vector<PromptChunk> chunks(weights.size());
    double cumulative = 0.0;
    int first_batch = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
        cumulative += weights[i];
        // Each node ends where its share of the batches ends (the last one
        // at the prompt's end whatever the rounding).
        const int end_batch = i + 1 == weights.size()
                                  ? n_batches
                                  : std::clamp(static_cast<int>(std::lround(n_batches * cumulative / total)), first_batch,
                                               n_batches);
        const int begin = std::min(first_batch * n_batch, n_tok);
        const int end = std::min(end_batch * n_batch, n_tok);
        chunks[i] = {pos0 + begin, std::max(0, end - begin)};
        first_batch = end_batch;
    }
    return chunks;
}

}  // namespace tessera
