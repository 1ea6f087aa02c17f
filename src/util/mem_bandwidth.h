// Measures this machine's memory read bandwidth: the ceiling for token
// generation, which streams every weight from memory once per token. Reported
// by `tessera bench` beside the bandwidth generation actually reaches.
#pragma once

#include "util/anonymous_memory.h"
#include "util/thread_pool.h"

#include <cstddef>
#include <cstdint>

namespace tessera {

// The probe's buffer for a CPU whose largest cache holds llc_bytes: 256 MiB,
// or twice that cache where it is larger. A buffer the cache can mostly hold
// reads partly from it: on an Intel Xeon with 260 MiB of L3, 256 MiB read at
// 2 threads at 37-39 GB/s against 32.5-33.7 GB/s for 384 MiB to 2 GiB, and
// generation read as 0.69-0.73 of that ceiling instead of 0.86-0.90.
size_t probe_bytes_beyond_caches(uint64_t llc_bytes);

// A buffer much larger than the caches, in the kind of memory weights are
// copied to (util/anonymous_memory.h), read by every thread of a pool. It is
// made once, so the ceiling can be measured again beside each timed run: on a
// shared host the bandwidth drifts by tens of percent from minute to minute.
class ReadBandwidthProbe {
public:
    // Reads prefetch far_prefetch bytes ahead into L2 and near_prefetch
    // bytes ahead into L1, each unless 0: the grouped kernels' distances
    // (ops/group_prefetch.h), so the ceiling streams the way they do.
    explicit ReadBandwidthProbe(ThreadPool& pool, size_t bytes, size_t far_prefetch = 8192,
                                size_t near_prefetch = 0);
    // The best of `passes` reads of the whole buffer, in GB/s (1e9 bytes/s):
    // the peak of a few milliseconds each.
    double measure(int passes = 3);
    // Whole reads of the buffer, one after another, until `seconds` have
    // passed (at least one read): the bytes over the time, in GB/s. What a
    // read loop sustains over an interval, the figure to set beside a
    // generation run of the same length. On a shared host the peak of short
    // reads is not: at 2 threads here single reads of 256 MiB ranged from
    // 16 to 90 GB/s within seconds, and the probe itself, run for 1.5 s,
    // sustained 0.81-0.96 of the best of three reads before and after it.
    double sustained(double seconds);
    // The bytes one read of the buffer covers.
    uint64_t bytes_per_read() const;
    // Reads from now on prefetch as the constructor's arguments say.
    void set_prefetch(size_t far_prefetch, size_t near_prefetch);

private:
    // One read of the whole buffer: its seconds.
    double read_once();

    ThreadPool& pool_;
    AnonymousMemory buffer_;
    size_t n_;  // 64-bit words
    size_t far_words_;
    size_t near_words_;
    uint64_t sink_ = 0;
};

}  // namespace tessera
