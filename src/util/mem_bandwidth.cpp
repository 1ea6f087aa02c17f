#include "util/mem_bandwidth.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace tessera {

namespace {

// A ceiling must be read the fastest way this machine knows, or generation
// appears to beat it: full-width vector loads (one clone per instruction set,
// chosen at load time) and software prefetch 8 KiB ahead into L2, as the
// weight kernels do (ops/row_groups.h). A plain loop of scalar sums measured
// ~10% lower at 2 threads here, no prefetch ~18% lower, and prefetch into L1
// (prefetcht0) ~3% lower than into L2 (25 alternating rounds, Zen 5). The
// caller gives the distances the kernels use (ops/group_prefetch.h): where
// they also prefetch a few KiB ahead into L1, so does the probe (the same or
// ~3% faster on the Intel Xeon they do it on).
using WordVector = uint64_t __attribute__((vector_size(64)));
constexpr size_t kWordsPerStep = 32;  // four vectors, four cache lines

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
uint64_t sum_words(const uint64_t* words, size_t n, size_t far_words, size_t near_words) {
    WordVector s0{}, s1{}, s2{}, s3{};
    for (size_t i = 0; i + kWordsPerStep <= n; i += kWordsPerStep) {
        if (far_words > 0) {
            for (size_t line = 0; line < kWordsPerStep; line += 8) __builtin_prefetch(words + i + far_words + line, 0, 2);
        }
        if (near_words > 0) {
            for (size_t line = 0; line < kWordsPerStep; line += 8) __builtin_prefetch(words + i + near_words + line, 0, 3);
        }
        WordVector v[4];
        std::memcpy(v, words + i, sizeof(v));
        s0 += v[0];
        s1 += v[1];
        s2 += v[2];
        s3 += v[3];
    }
    const WordVector s = s0 + s1 + s2 + s3;
    uint64_t total = 0;
    for (int k = 0; k < 8; ++k) total += s[k];
    return total;
}

}  // namespace

size_t probe_bytes_beyond_caches(uint64_t llc_bytes) {
    constexpr uint64_t kMin = uint64_t{256} << 20;
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    // Whole MiB, so the buffer splits into whole steps for every thread count.
    const uint64_t twice = (std::min<uint64_t>(llc_bytes, uint64_t{1} << 40) * 2 + kMiB - 1) / kMiB * kMiB;
    return static_cast<size_t>(std::max(kMin, twice));
}

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes, size_t far_prefetch, size_t near_prefetch)
    : pool_(pool),
      buffer_(bytes),
      n_(bytes / sizeof(uint64_t)),
      far_words_(far_prefetch / sizeof(uint64_t)),
      near_words_(near_prefetch / sizeof(uint64_t)) {
    if (n_ == 0) throw make_error("internal: bandwidth probe of {} bytes", bytes);
    auto* words = reinterpret_cast<uint64_t*>(buffer_.data());
    // Written once first, so every page is resident before a timed read.
    pool_.parallel_for(static_cast<int64_t>(n_), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) words[i] = static_cast<uint64_t>(i);
    });
}

double ReadBandwidthProbe::read_once() {
    const auto* words = reinterpret_cast<const uint64_t*>(buffer_.data());
    std::atomic<uint64_t> sink{0};
    const double start = now_seconds();
    pool_.parallel_for(static_cast<int64_t>(n_ / kWordsPerStep), [&](int64_t begin, int64_t end) {
        const auto b = static_cast<size_t>(begin) * kWordsPerStep, e = static_cast<size_t>(end) * kWordsPerStep;
        sink.fetch_add(sum_words(words + b, e - b, far_words_, near_words_), std::memory_order_relaxed);
    });
    const double seconds = now_seconds() - start;
    // The sums feed an atomic read here, so the reads cannot be optimized away.
    if (sink.load() == 1) sink_ += 1;
    return seconds;
}

double ReadBandwidthProbe::measure(int passes) {
    if (passes < 1) throw make_error("internal: bandwidth probe of {} passes", passes);
    double best = 0.0;
    for (int pass = 0; pass < passes; ++pass) {
        const double seconds = read_once();
        if (seconds > 0) best = std::max(best, static_cast<double>(bytes_per_read()) / seconds / 1e9);
    }
    return best;
}

double ReadBandwidthProbe::sustained(double seconds) {
    if (!(seconds >= 0)) throw make_error("internal: bandwidth probe over {} s", seconds);
    const double start = now_seconds();
    uint64_t reads = 0;
    do {
        read_once();
        ++reads;
    } while (now_seconds() - start < seconds);
    const double elapsed = now_seconds() - start;
    return elapsed > 0 ? static_cast<double>(reads * bytes_per_read()) / elapsed / 1e9 : 0.0;
}

void ReadBandwidthProbe::set_prefetch(size_t far_prefetch, size_t near_prefetch) {
    far_words_ = far_prefetch / sizeof(uint64_t);
    near_words_ = near_prefetch / sizeof(uint64_t);
}

uint64_t ReadBandwidthProbe::bytes_per_read() const { return n_ / kWordsPerStep * kWordsPerStep * sizeof(uint64_t); }

}  // namespace tessera
