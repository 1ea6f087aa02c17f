// A node's measured speed, for sizing its share of a plan: the time to
// multiply one layer's FFN gate and up matrices by a vector with the node's
// threads (the kind of work a share consists of), best of several runs.
#pragma once

#include "model/llama_model.h"
#include "util/thread_pool.h"

#include <span>
#include <vector>

namespace tessera {

double probe_seconds(const LlamaModel& model, ThreadPool& pool);

// Weights from probe times (faster node, larger weight), rounded to quarters
// of the fastest so that timer noise between equal nodes does not make the
// plan change from run to run. A node within 20% of the fastest counts as
// equal: on a shared machine two probes of one kind of core differ by that
// much, and an uneven split of equal nodes costs every token.
std::vector<double> weights_from_probes(std::span<const double> seconds);

}  // namespace tessera
