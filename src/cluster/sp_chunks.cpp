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

std::vector<ChunkTraffic> prompt_chunk_traffic(std::span<const PromptChunk> chunks, int history, int n_layer,
                                               uint64_t position_bits, int n_batch) {
    // Rows go in messages of at most n_batch positions, each with a 12-byte
    // header (tp_messages.h kSpRowsHeaderBytes) and the frame's 16 bytes.
    constexpr uint64_t kMessageBytes = 12;
    const auto bytes_of = [&](int64_t positions) {
        if (positions <= 0) return uint64_t{0};
        const int64_t messages = (positions + n_batch - 1) / n_batch;
        return static_cast<uint64_t>(n_layer) * ((static_cast<uint64_t>(positions) * position_bits + 7) / 8 +
                                                 static_cast<uint64_t>(messages) * kMessageBytes);
    };
    std::vector<ChunkTraffic> traffic(chunks.size());
    for (size_t i = 1; i < chunks.size(); ++i) {
        if (chunks[i].n_tok == 0) continue;
        // Everything before its chunk, from the root; its own rows, to the root.
        const uint64_t before = bytes_of(static_cast<int64_t>(chunks[i].pos0) - chunks[0].pos0 + history);
        traffic[i].received += before;
        traffic[0].sent += before;
        traffic[i].sent += bytes_of(chunks[i].n_tok);
        traffic[0].received += bytes_of(chunks[i].n_tok);
    }
    return traffic;
}

}  // namespace tessera
