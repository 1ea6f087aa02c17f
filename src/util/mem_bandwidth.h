// Measures this machine's memory read bandwidth: the ceiling for token
// generation, which streams every weight from memory once per token. Reported
// by `tessera bench` beside the bandwidth generation actually reaches.
#pragma once

#include "util/anonymous_memory.h"
#include "util/thread_pool.h"

#include <cstddef>

namespace tessera {

// A buffer much larger than the caches, in the kind of memory weights are
// copied to (util/anonymous_memory.h), read by every thread of a pool. It is
// made once, so the ceiling can be measured again beside each timed run: on a
// shared host the bandwidth drifts by tens of percent from minute to minute.
class ReadBandwidthProbe {
public:
    explicit ReadBandwidthProbe(ThreadPool& pool, size_t bytes = size_t{256} << 20);
    // The best of `passes` reads of the whole buffer, in GB/s (1e9 bytes/s).
    double measure(int passes = 3);

private:
    ThreadPool& pool_;
    AnonymousMemory buffer_;
    size_t n_;  // 64-bit words
};

}  // namespace tessera
