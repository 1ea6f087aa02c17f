// A persistent pool of worker threads that run one parallel task at a time.
// The calling thread takes part, so a pool of N threads starts N-1
// std::threads.
//
// A task is cut into parts that threads claim from a shared counter, so the
// caller never depends on a particular worker being scheduled: if the OS has
// given a worker's core to another process, the caller (or another worker)
// simply runs that worker's parts too, instead of waiting a whole scheduler
// time slice for it. A worker that arrives after every part was claimed is
// turned away and never touches the task.
//
// Waiting threads (idle workers, and a caller waiting for parts in flight)
// spin briefly, because a token's matrix-vector products follow each other
// within microseconds, and then block, so a small board does not burn a core
// while the model waits. Tasks are passed as FunctionRef: starting one never
// allocates.
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

    // Runs task(part, n_parts) once for every part in [0, n_parts) (default:
    // one per thread) and returns when all are done. Parts run concurrently
    // on distinct threads, and never twice, so per-part scratch indexed by
    // part is safe. An exception thrown by any part is rethrown here.
    void run(FunctionRef<void(int, int)> task, int n_parts = 0);

    // Splits [0, n) into contiguous chunks, long first and shorter as the work
    // runs out (for balance), and runs body(begin, end) on each.
    void parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> body);

private:
    void worker_loop();
    // Claims and runs parts of the current task until none is left.
    void run_parts();
    bool try_enter(uint64_t generation);
    void leave();

    int n_threads_;
    std::vector<std::thread> workers_;

    // state_ = generation << 32 | closed << 31 | threads inside the task.
    std::atomic<uint64_t> state_{0};
    const FunctionRef<void(int, int)>* task_ = nullptr;
    int n_parts_ = 0;
    std::atomic<int> next_part_{0};

    std::mutex mutex_;
    std::condition_variable wake_;   // idle workers wait here
    std::condition_variable done_;   // the caller waits here for parts in flight
    std::atomic<int> sleepers_{0};   // workers blocked (or about to block) on wake_
    std::atomic<bool> caller_waiting_{false};
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;  // first exception of the current task, under mutex_
};

}  // namespace tessera
