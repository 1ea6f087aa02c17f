// A node's measured speed, for sizing its share of a plan: the time to
// multiply the FFN gate and up matrices of the first layers (64 MiB of them,
// or all) by a vector with the node's threads (the kind of work a share
// consists of, streamed from memory as a token's step streams it), best of
// several sweeps, per layer.
#pragma once

#include "model/llama_model.h"
#include "util/thread_pool.h"

#include <span>
#include <vector>

namespace tessera {

double probe_seconds(const LlamaModel& model, ThreadPool& pool);

// The bytes of one layer's gate and up matrices: a node reading B bytes of its slice
// per token takes about probe_seconds * B / probe_bytes (the planner's
// prediction of compute time).
uint64_t probe_bytes(const LlamaModel& model);

// Weights from probe times (faster node, larger weight), rounded to quarters
// of the fastest so that timer noise between equal nodes does not make the
// plan change from run to run. A node within 20% of the fastest counts as
// equal: on a shared machine two probes of one kind of core differ by that
// much, and an uneven split of equal nodes costs every token.
std::vector<double> weights_from_probes(std::span<const double> seconds);

}  // namespace tessera
