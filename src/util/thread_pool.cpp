#include "util/thread_pool.h"

#include "util/error.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace tessera {

namespace {
// About tens of microseconds of polling before a thread sleeps: long enough to
// bridge the gap between two matrix-vector products of one token, short
// enough that an idle pool sleeps almost at once.
constexpr int kSpinIterations = 20000;
// parallel_for claims 1 / (threads x this) of the work left at a time. Each
// claim starts a new memory stream that the prefetchers must pick up again:
// over a token's sequence of products, 1 streamed up to 11% faster than 2
// at 2 threads (Zen 4; Q4_K 11%, Q4_0 4%, Q8_0 the same), with the tail
// still cut fine enough.
constexpr int64_t kGuidedDivisor = 1;

constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kActiveMask = kClosed - 1;

uint64_t generation_of(uint64_t state) { return state >> 32; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
    if (n_threads < 1) throw make_error("thread count must be at least 1 (got {})", n_threads);
    // Generation 0 is closed: a worker can only enter a published task.
    state_.store(kClosed);
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    {
        std::lock_guard<std::mutex> lock(mutex_);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

bool ThreadPool::try_enter(uint64_t generation) {
    uint64_t s = state_.load(std::memory_order_acquire);
    while (generation_of(s) == generation && (s & kClosed) == 0) {
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
}

void ThreadPool::leave() {
    const uint64_t before = state_.fetch_sub(1, std::memory_order_acq_rel);
    if ((before & kActiveMask) == 1 && (before & kClosed) != 0 && caller_waiting_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
    }
}

void ThreadPool::run_parts() {
    for (;;) {
        const int part = next_part_.fetch_add(1, std::memory_order_relaxed);
        if (part >= n_parts_) return;
        try {
            (*task_)(part, n_parts_);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!error_) error_ = std::current_exception();
        }
    }
}

void ThreadPool::run(FunctionRef<void(int, int)> task, int n_parts) {
    if (n_parts <= 0) n_parts = n_threads_;
    if (n_threads_ == 1) {
        for (int p = 0; p < n_parts; ++p) task(p, n_parts);
        return;
    }
    task_ = &task;
    n_parts_ = n_parts;
    error_ = nullptr;
    next_part_.store(0, std::memory_order_relaxed);
    // Publish: a new generation, open, with the caller inside.
    const uint64_t generation = generation_of(state_.load()) + 1;
    state_.store(generation << 32 | 1);
    if (sleepers_.load() > 0) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
        }
        wake_.notify_all();
    }
    run_parts();
    // Every part is claimed: close the door, then wait for parts in flight.
    uint64_t s = state_.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
    s = state_.fetch_sub(1, std::memory_order_acq_rel) - 1;  // the caller leaves
    for (int spins = 0; (s & kActiveMask) != 0 && spins < kSpinIterations; ++spins) {
        cpu_relax();
        s = state_.load(std::memory_order_acquire);
    }
    if ((s & kActiveMask) != 0) {
        caller_waiting_.store(true);
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return (state_.load() & kActiveMask) == 0; });
        caller_waiting_.store(false);
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> body) {
    if (n <= 0) return;
    if (n_threads_ == 1) {
        body(0, n);
        return;
    }
    // Guided chunks: each claim takes a share of what is left, so the first
    // chunks are long (a matrix's rows stream in order) and the last ones
    // short, and no thread waits long for another's last chunk at the end.
    std::atomic<int64_t> next{0};
    const int64_t divisor = static_cast<int64_t>(n_threads_) * kGuidedDivisor;
    run([&](int, int) {
        int64_t begin = next.load(std::memory_order_relaxed);
        for (;;) {
            if (begin >= n) return;
            const int64_t size = std::max<int64_t>(1, (n - begin) / divisor);
            if (!next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) continue;
            body(begin, std::min(n, begin + size));
            begin = next.load(std::memory_order_relaxed);
        }
    });
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        uint64_t generation = generation_of(state_.load(std::memory_order_acquire));
        for (int spins = 0; generation == seen && spins < kSpinIterations && !stop_.load(std::memory_order_relaxed);
             ++spins) {
            cpu_relax();
            generation = generation_of(state_.load(std::memory_order_acquire));
        }
        if (generation == seen) {
            sleepers_.fetch_add(1);
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return stop_.load() || generation_of(state_.load()) != seen; });
            }
            sleepers_.fetch_sub(1);
            generation = generation_of(state_.load(std::memory_order_acquire));
        }
        if (stop_.load()) return;
        seen = generation;
        // Too late (every part claimed, the door closed) means nothing to do.
        if (try_enter(generation)) {
            run_parts();
            leave();
        }
    }
}

}  // namespace tessera
