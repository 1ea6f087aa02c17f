// serve's /metrics: request counts, tokens and latencies, and the batcher's
// and each node's step times, in Prometheus' text format.
#pragma once

#include "engine/sequence_batcher.h"

#include <atomic>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <ostream>
#include <string>

namespace tessera {

// A Prometheus histogram of seconds (buckets from 50 ms to 60 s).
class Histogram {
public:
    void observe(double seconds);
    // Its `# TYPE` line, cumulative buckets, sum and count under `name`.
    void write(std::ostream& o, const char* name);

private:
    static constexpr double kBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    std::mutex mutex_;
    uint64_t counts_[std::size(kBuckets) + 1] = {};
    double sum_ = 0.0;
};

struct Metrics {
    std::atomic<uint64_t> requests{0}, errors{0}, prompt_tokens{0}, generated_tokens{0}, cached_tokens{0};
    Histogram latency;  // request received -> answer complete
    Histogram ttft;     // request received -> first text (queueing included)

    // The whole /metrics page, with the batcher's statistics.
    std::string text(const BatcherStats& batches);
};

}  // namespace tessera
