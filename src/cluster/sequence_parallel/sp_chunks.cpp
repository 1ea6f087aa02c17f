#include "cluster/sequence_parallel/sp_chunks.h"

#include "model/hparams.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>

namespace tessera {

PrefillCostModel prefill_cost_model(const ModelHParams& hp, const SparseOptions& sparse) {
    const double embd = hp.n_embd;
    const double q = static_cast<double>(hp.q_dim());
    const double kv = hp.kv_dim();
    // Multiply-adds a position spends on one layer's matrices and on one
    // attended position (Q.K over every query head, then its V row).
    const double matrices = embd * q + 2.0 * embd * kv + q * embd + 3.0 * embd * hp.n_ff;
    const double pair = 2.0 * q;
    PrefillCostModel m;
    m.pair_cost = matrices > 0.0 ? kAttentionKernelFactor * pair / matrices : 0.0;
    m.sparse = sparse;
    if (hp.sliding_window > 0 && hp.n_layer > 0) {
        int sliding = 0;
        for (int il = 0; il < hp.n_layer; ++il) sliding += hp.is_sliding(il) ? 1 : 0;
        m.window = hp.sliding_window;
        m.sliding_share = static_cast<double>(sliding) / hp.n_layer;
    }
    return m;
}

std::vector<double> prefill_batch_costs(int pos0, int n_tok, int n_batch, const PrefillCostModel& model) {
    if (pos0 < 0 || n_tok < 1 || n_batch < 1) {
        throw make_error("internal: costs of {} positions at {} in batches of {}", n_tok, pos0, n_batch);
    }
    std::vector<double> costs;
    SparseCandidates candidates;
    for (int b = 0; b < n_tok; b += n_batch) {
        double cost = 0.0;
        for (int p = pos0 + b; p < pos0 + std::min(n_tok, b + n_batch); ++p) {
            double attended = p + 1.0;
            if (model.sparse.enabled && !sparse_is_dense_at(p, model.sparse)) {
                sparse_candidates(p, model.sparse, candidates);
                attended = static_cast<double>(p - candidates.window_begin + 1) +
                           static_cast<double>(candidates.tokens.size() + candidates.blocks.size());
            }
            // Sliding layers see at most their window (sparse options apply
            // only to the other layers).
            if (model.window > 0) {
                attended = model.sliding_share * std::min<double>(p + 1.0, model.window) +
                           (1.0 - model.sliding_share) * attended;
            }
            cost += 1.0 + model.pair_cost * attended;
        }
        costs.push_back(cost);
    }
    return costs;
}

std::vector<PromptChunk> plan_prompt_chunks(int pos0, int n_tok, int n_batch, std::span<const double> weights,
                                            std::span<const double> batch_costs) {
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
    if (!batch_costs.empty() && batch_costs.size() != static_cast<size_t>(n_batches)) {
        throw make_error("internal: {} batch costs for {} batches", batch_costs.size(), n_batches);
    }
    // cost_before[k]: what batches [0, k) cost.
    std::vector<double> cost_before(static_cast<size_t>(n_batches) + 1, 0.0);
    for (int k = 0; k < n_batches; ++k) {
        const double c = batch_costs.empty() ? 1.0 : batch_costs[static_cast<size_t>(k)];
        if (!(c > 0.0)) throw make_error("internal: a batch cost of {}", c);
        cost_before[static_cast<size_t>(k) + 1] = cost_before[static_cast<size_t>(k)] + c;
    }
    const double all = cost_before.back();
    std::vector<PromptChunk> chunks(weights.size());
    double cumulative = 0.0;
    int first_batch = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
        cumulative += weights[i];
        // Each node ends at the batch boundary nearest to where its share of
        // the cost ends (the last one at the prompt's end whatever the
        // rounding; halfway rounds up, as lround did for equal costs).
        int end_batch = n_batches;
        if (i + 1 < weights.size()) {
            const double target = all * cumulative / total;
            const auto upper = std::lower_bound(cost_before.begin(), cost_before.end(), target);
            int k = static_cast<int>(upper - cost_before.begin());
            if (k > 0 && (k > n_batches || target - cost_before[static_cast<size_t>(k) - 1] <
                                                cost_before[static_cast<size_t>(k)] - target)) {
                --k;
            }
            end_batch = std::clamp(k, first_batch, n_batches);
        }
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
    // header (cluster/session/messages.h kSpRowsHeaderBytes) and the frame's 16 bytes.
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
