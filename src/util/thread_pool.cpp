#include "util/thread_pool.h"

#include "util/error.h"

#include <algorithm>
#include <utility>

namespace tessera {

namespace {
// About tens of microseconds of polling before a thread sleeps: long enough to
// bridge the gap between two matrix-vector products of one token, short
// enough that an idle pool sleeps almost at once.
constexpr int kSpinIterations = 20000;
// Chunks per thread in parallel_for: enough for others to take over a
// descheduled thread's share, few enough that each chunk streams a long run.
constexpr int64_t kChunksPerThread = 4;

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
    const int64_t chunks = std::min<int64_t>(n, n_threads_ == 1 ? 1 : n_threads_ * kChunksPerThread);
    run(
        [&](int part, int count) {
            const int64_t begin = n * part / count;
            const int64_t end = n * (part + 1) / count;
            if (begin < end) body(begin, end);
        },
        static_cast<int>(chunks));
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
