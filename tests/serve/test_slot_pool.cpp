// serve's slot choice and queue, without a model: the free slot sharing the
// longest prefix with the prompt, the one unused longest among equals; and
// requests served first come, first served however many wait.
#include "serve/slot_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace tessera {
namespace {

TEST(SlotPool, PicksTheLongestSharedPrefixThenTheLeastRecentlyUsed) {
    const std::vector<int32_t> a = {1, 5, 6, 7}, b = {1, 5, 9}, empty;
    std::vector<SlotView> slots = {{&a, false, 3}, {&b, false, 1}, {&empty, false, 2}};
    EXPECT_EQ(pick_slot(slots, {1, 5, 6, 7, 8}), 0);  // shares 4
    EXPECT_EQ(pick_slot(slots, {1, 5, 9, 2}), 1);     // shares 3
    EXPECT_EQ(pick_slot(slots, {1, 5}), 1);           // 0 and 1 share 2: 1 was used longer ago
    EXPECT_EQ(pick_slot(slots, {4}), 1);              // nothing shared: the least recently used
    slots[1].busy = true;
    EXPECT_EQ(pick_slot(slots, {1, 5, 9}), 0);
    EXPECT_EQ(pick_slot(slots, {4}), 2);
    slots[0].busy = slots[2].busy = true;
    EXPECT_EQ(pick_slot(slots, {4}), -1);
}

TEST(SlotPool, WaitersAreServedInArrivalOrder) {
    SlotPool pool(1);
    const int first = pool.acquire({1});
    EXPECT_EQ(first, 0);
    std::mutex order_mutex;
    std::vector<int> order;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 5; ++i) {
        waiters.emplace_back([&, i] {
            const int slot = pool.acquire({i});
            {
                std::lock_guard<std::mutex> lock(order_mutex);
                order.push_back(i);
            }
            pool.release(slot);
        });
        // Each waiter queues before the next one starts.
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    pool.release(first);
    for (auto& w : waiters) w.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(SlotPool, TicketsCountWhileTheyLive) {
    std::atomic<int> waiting{0};
    {
        QueueTicket a(waiting);
        QueueTicket b(waiting);
        EXPECT_EQ(waiting.load(), 2);
    }
    EXPECT_EQ(waiting.load(), 0);
}

}  // namespace
}  // namespace tessera
