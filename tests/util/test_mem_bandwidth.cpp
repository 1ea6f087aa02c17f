// The bandwidth probe's two measures. Speed itself is never asserted (shared
// machines are noisy): only that each measure reads what it says, for as long
// as it says, and refuses what it cannot measure.
#include "util/mem_bandwidth.h"
#include "util/timer.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tessera {

TEST(ReadBandwidthProbe, SustainedReadsForAtLeastTheIntervalAsked) {
    ThreadPool pool(2);
    ReadBandwidthProbe probe(pool, size_t{8} << 20);
    for (const double seconds : {0.0, 0.05, 0.2}) {
        const double start = now_seconds();
        const double gbs = probe.sustained(seconds);
        const double elapsed = now_seconds() - start;
        EXPECT_GE(elapsed, seconds);
        // At least one read of 8 MiB, in no more than the time it took.
        EXPECT_GT(gbs, 0.0);
        EXPECT_GE(gbs * 1e9 * elapsed, 0.99 * static_cast<double>(size_t{8} << 20)) << seconds;
    }
    EXPECT_THROW(probe.sustained(-1.0), std::runtime_error);
}

TEST(ReadBandwidthProbe, PeakIsTheBestOfItsReads) {
    ThreadPool pool(2);
    ReadBandwidthProbe probe(pool, size_t{8} << 20);
    EXPECT_GT(probe.measure(1), 0.0);
    EXPECT_GT(probe.measure(4), 0.0);
    EXPECT_THROW(probe.measure(0), std::runtime_error);
    // Prefetching as the kernels do on Intel (12 KiB into L2, 3 KiB into L1),
    // past the buffer's end on its last lines: hints, never a fault.
    ReadBandwidthProbe near(pool, size_t{1} << 20, 12288, 3072);
    EXPECT_GT(near.measure(2), 0.0);
    EXPECT_GT(near.sustained(0.01), 0.0);
}

TEST(ReadBandwidthProbe, TheBufferIsTwiceTheLargestCache) {
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    EXPECT_EQ(probe_bytes_beyond_caches(0), 256 * kMiB);        // nothing known
    EXPECT_EQ(probe_bytes_beyond_caches(2 * kMiB), 256 * kMiB);  // a board's L2
    EXPECT_EQ(probe_bytes_beyond_caches(128 * kMiB), 256 * kMiB);
    // The Intel Xeon whose 260 MiB of L3 held most of a 256 MiB buffer.
    EXPECT_EQ(probe_bytes_beyond_caches(266240 * uint64_t{1024}), 520 * kMiB);
    // Whole MiB, rounded up.
    EXPECT_EQ(probe_bytes_beyond_caches(200 * kMiB + 1), 401 * kMiB);
}

}  // namespace tessera
