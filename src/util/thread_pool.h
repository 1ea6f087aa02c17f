// A persistent pool of worker threads that run one parallel-for at a time.
// The calling thread takes part as worker 0, so a pool of N threads starts N-1
// std::threads. Waiting threads (idle workers, and the caller waiting for the
// others to finish) spin briefly, because a token's matrix-vector products
// follow each other within microseconds, and then block on a condition
// variable, so a small board does not burn a core while the model waits.
// Tasks are passed as FunctionRef: starting a parallel loop never allocates.
#pragma once

#include "util/function_ref.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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

    // Runs task(thread_index, n_threads) on every thread and returns when all
    // are done. An exception thrown by any thread is rethrown here (the first
    // one), so no error is lost on a worker thread.
    void run(FunctionRef<void(int, int)> task);

    // Splits [0, n) into contiguous chunks, one per thread, and runs body(begin, end) on each.
    void parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> body);

private:
    void worker_loop(int index);
    void run_guarded(int index);
    void wait_for_workers();

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;  // workers wait here for a new task
    std::condition_variable done_;  // the caller waits here for the last worker
    const FunctionRef<void(int, int)>* task_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
    std::exception_ptr error_;  // first exception of the current task, under mutex_
};

}  // namespace tessera
