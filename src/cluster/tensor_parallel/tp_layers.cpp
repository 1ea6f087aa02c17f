#include "cluster/tensor_parallel/tp_layers.h"

#include "util/timer.h"

namespace tessera {

void run_tp_layers(RankRunner& forward, PartialExchange& exchange, float* x, std::span<const SeqRun> runs,
                   int deadline_ms, TpLayerScratch& s, TpLayerTimes& times) {
    const int n_tok = forward.check_runs(runs);
    const int n_embd = static_cast<int>(forward.hparams().n_embd);
    const size_t n = static_cast<size_t>(n_tok) * n_embd;
    if (s.sum.size() < n) {
        s.sum.resize(n);
        s.partial.resize(n);
    }
    const Slice& slice = forward.slice();
    // Each band of a partial goes to the peers as soon as the product has
    // it (PartialExchange::send_band); the sink is gone when this returns.
    uint32_t step = 0;
    struct SinkGuard {
        RankRunner& f;
        ~SinkGuard() { f.set_partial_bands(1, nullptr); }
    } guard{forward};
    const int bands = exchange.bands_for(n_tok, n_embd);
    if (bands > 1) {
        forward.set_partial_bands(bands, [&](int c0, int c1) {
            exchange.send_band(step, n_tok, n_embd, s.partial.data(), c0, c1);
        }, exchange.first_band(n_tok, n_embd));
    }
    for (int layer = slice.layer_begin; layer < slice.layer_end; ++layer) {
        for (int part = 0; part < 2; ++part) {
            const double start = now_seconds();
            step = static_cast<uint32_t>(2 * layer + part);
            if (part == 0) {
                forward.attention_partial_of(layer, x, runs, s.partial.data());
            } else {
                forward.ffn_partial_of(layer, x, n_tok, s.partial.data());
            }
            const double computed = now_seconds();
            if (exchange.exact()) {
                exchange.exact_sum(step, n_tok, n_embd, s.partial.data(), deadline_ms);
            } else {
                exchange.fast_sum(step, n_tok, n_embd, s.partial.data(), s.sum.data(), deadline_ms);
            }
            const double summed = now_seconds();
            if (!times.peer_seconds.empty()) {
                const auto& peers = exchange.peer_stats();
                for (size_t r = 0; r < peers.size(); ++r) {
                    if (static_cast<int>(r) != exchange.rank()) times.peer_seconds[r] += peers[r].arrival_seconds - start;
                }
            }
            if (exchange.exact()) {
                if (part == 0) forward.add_attention_output(layer, s.partial.data(), x, n_tok);
                else forward.add_ffn_output(layer, s.partial.data(), x, n_tok);
            } else {
                if (part == 0) forward.add_attention_output(layer, s.sum.data(), x, n_tok);
                else forward.add_ffn_output(layer, s.sum.data(), x, n_tok);
            }
            times.compute_seconds += (computed - start) + (now_seconds() - summed);
            times.wait_seconds += summed - computed;
            (part == 0 ? times.attention_wait_seconds : times.ffn_wait_seconds) += summed - computed;
            times.syncs++;
        }
    }
}

}  // namespace tessera
