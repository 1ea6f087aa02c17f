#include "util/thread_pool.h"

#include "util/error.h"

namespace tessera {

namespace {
// About tens of microseconds of polling before a worker sleeps.
constexpr int kSpinIterations = 20000;
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

void ThreadPool::run(const std::function<void(int, int)>& task) {
    if (n_threads_ == 1) {
        task(0, 1);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        task_ = &task;
        pending_.store(n_threads_ - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    task(0, n_threads_);
    // The workers' share is usually done by the time ours is: spin, then yield.
    int spins = 0;
    while (pending_.load(std::memory_order_acquire) != 0) {
        if (++spins > kSpinIterations) std::this_thread::yield();
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
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
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) ++spins;
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        const std::function<void(int, int)>* task = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stop_) return;
            seen = generation_.load(std::memory_order_acquire);
            task = task_;
        }
        (*task)(index, n_threads_);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace tessera
