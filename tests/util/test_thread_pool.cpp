#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tessera {

// Every index is visited exactly once, for many sizes and thread counts, and
// the pool can be reused many times in a row (as the token loop does).
TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            for (int rep = 0; rep < 50; ++rep) {
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
                });
            }
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 50) << threads << " " << n;
        }
    }
}

TEST(ThreadPool, RunGivesEachThreadItsIndex) {
    ThreadPool pool(4);
    std::vector<std::atomic<int>> seen(4);
    pool.run([&](int index, int count) {
        EXPECT_EQ(count, 4);
        seen[static_cast<size_t>(index)]++;
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// An error on a worker thread reaches the caller instead of being lost, and
// the pool keeps working afterwards.
TEST(ThreadPool, RethrowsAWorkersException) {
    ThreadPool pool(3);
    EXPECT_THROW(pool.run([](int index, int) {
        if (index == 2) throw std::runtime_error("worker failed");
    }),
                 std::runtime_error);
    std::atomic<int> ran{0};
    pool.run([&](int, int) { ran++; });
    EXPECT_EQ(ran.load(), 3);
}

// Waiting threads block after their spin: a pool left idle longer than the
// spin still wakes for the next task.
TEST(ThreadPool, WakesAfterSleeping) {
    ThreadPool pool(2);
    for (int rep = 0; rep < 3; ++rep) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::atomic<int> ran{0};
        pool.run([&](int, int) { ran++; });
        EXPECT_EQ(ran.load(), 2);
    }
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_ANY_THROW(ThreadPool(0)); }

}  // namespace tessera
