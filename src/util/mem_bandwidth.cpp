#include "util/mem_bandwidth.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace tessera {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
    const size_t n = bytes / sizeof(uint64_t);
    if (n == 0 || reps < 1) throw make_error("internal: bandwidth probe of {} bytes, {} reps", bytes, reps);
    std::unique_ptr<uint64_t[]> buffer(new uint64_t[n]);
    // Each thread first writes its own part, so the pages are resident and
    // local to the thread that reads them (as a node's weight slice is).
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) buffer[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
    });
    std::atomic<uint64_t> sink{0};
    double best = 0.0;
    for (int rep = 0; rep < reps; ++rep) {
        const double start = now_seconds();
        pool.parallel_for(static_cast<int64_t>(n), [&](int64_t begin, int64_t end) {
            // Several independent sums keep the loads in flight; the compiler
            // vectorizes this loop for the portable baseline ISA.
            uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int64_t i = begin;
            for (; i + 4 <= end; i += 4) {
                s0 += buffer[static_cast<size_t>(i)];
                s1 += buffer[static_cast<size_t>(i) + 1];
                s2 += buffer[static_cast<size_t>(i) + 2];
                s3 += buffer[static_cast<size_t>(i) + 3];
            }
            for (; i < end; ++i) s0 += buffer[static_cast<size_t>(i)];
            sink.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
        });
        const double seconds = now_seconds() - start;
        if (seconds > 0) best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds / 1e9);
    }
    // The sums feed an atomic, so the reads cannot be optimized away.
    if (sink.load() == 1) best += 0.0;
    return best;
}

}  // namespace tessera
