// A persistent pool of worker threads that run one parallel-for at a time.
// The calling thread takes part as worker 0, so a pool of N threads starts N-1
// std::threads. Idle workers spin briefly (a token's matrix-vector products
// follow each other within microseconds) and then block on a condition
// variable, so a small board does not burn a core while the model waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs task(thread_index, n_threads) on every thread and returns when all are done.
    void run(const std::function<void(int, int)>& task);

    // Splits [0, n) into contiguous chunks, one per thread, and runs body(begin, end) on each.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    const std::function<void(int, int)>* task_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
};

}  // namespace tessera
