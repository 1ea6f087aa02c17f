// Measures this machine's memory read bandwidth: the ceiling for token
// generation, which streams every weight from memory once per token. Reported
// by `tessera bench` beside the bandwidth generation actually reaches.
#pragma once

#include "util/thread_pool.h"

#include <cstddef>

namespace tessera {

// Reads a buffer much larger than the caches with every thread of the pool,
// `reps` times, and returns the best rate in GB/s (1e9 bytes per second).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{512} << 20, int reps = 5);

}  // namespace tessera
