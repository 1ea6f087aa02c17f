// The layers of a tensor-parallel group as every rank runs them: each rank
// holds the residual rows x, norms them itself, computes its partial of
// each attention and FFN output, and adds the group's sum (PartialExchange)
// to x. Rank 0 and the workers run this same loop, so their residuals stay
// equal bit for bit (exact) or by construction (fast: the same rounded
// partials added in the same order).
#pragma once

#include "cluster/tensor_parallel/partial_exchange.h"
#include "model/slice_forward.h"

#include <span>
#include <vector>

namespace tessera {

struct TpLayerScratch {
    std::vector<float> sum;
    std::vector<double> partial;
};

struct TpLayerTimes {
    double compute_seconds = 0.0;  // norms, partials and residual adds
    double wait_seconds = 0.0;     // in the exchange
    // wait_seconds by the kind of sync: the attention syncs' (the heads are
    // even, so mostly the exchange itself) and the FFN syncs' (where a
    // mixture of experts' per-token imbalance between the ranks shows).
    double attention_wait_seconds = 0.0;
    double ffn_wait_seconds = 0.0;
    uint64_t syncs = 0;
    // Per rank (sized by the caller, or empty): from the start of each sync
    // to that rank's partial arriving, summed.
    std::vector<double> peer_seconds;
};

// Runs the slice's layers over x (n_tok rows of the runs) in place.
void run_tp_layers(RankRunner& forward, PartialExchange& exchange, float* x, std::span<const SeqRun> runs,
                   int deadline_ms, TpLayerScratch& scratch, TpLayerTimes& times);

}  // namespace tessera
