#include "util/thread_pool.h"

#include "util/error.h"

#include <utility>

namespace tessera {

namespace {
// About tens of microseconds of polling before a thread sleeps: long enough to
// bridge the gap between two matrix-vector products of one token, short
// enough that an idle pool sleeps almost at once.
constexpr int kSpinIterations = 20000;

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
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_guarded(int index) {
    try {
        (*task_)(index, n_threads_);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::run(FunctionRef<void(int, int)> task) {
    if (n_threads_ == 1) {
        task(0, 1);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        task_ = &task;
        error_ = nullptr;
        pending_.store(n_threads_ - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_guarded(0);
    wait_for_workers();
    std::exception_ptr error;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        task_ = nullptr;
        error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
}

void ThreadPool::wait_for_workers() {
    // The workers' share is usually done about when ours is: spin, then block.
    for (int spins = 0; spins < kSpinIterations; ++spins) {
        if (pending_.load(std::memory_order_acquire) == 0) return;
        cpu_relax();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> body) {
    if (n <= 0) return;
    run([&](int index, int count) {
        const int64_t begin = n * index / count;
        const int64_t end = n * (index + 1) / count;
        if (begin < end) body(begin, end);
    });
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        for (int spins = 0; spins < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++spins) {
            cpu_relax();
        }
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            if (stop_) return;
            seen = generation_.load(std::memory_order_acquire);
        }
        run_guarded(index);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // Taking the lock orders this notify after the caller's predicate
            // check, so the wake-up cannot be lost.
            std::lock_guard<std::mutex> lock(mutex_);
            done_.notify_one();
        }
    }
}

}  // namespace tessera
