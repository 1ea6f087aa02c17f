// serve's slots: --parallel N sequences, each with its own KV cache (a
// PrefixCache records what it holds). A request waits its turn, first come,
// first served, for a free slot, and takes the one whose cached tokens its
// prompt shares most of, so a conversation's next turn (its history resent)
// prefills only its new tokens.
#pragma once

#include "engine/prefix_cache.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace tessera {

// A request's place in the queue: counted while it lives.
struct QueueTicket {
    std::atomic<int>& count;
    explicit QueueTicket(std::atomic<int>& c) : count(c) { ++count; }
    ~QueueTicket() { --count; }
    QueueTicket(const QueueTicket&) = delete;
    QueueTicket& operator=(const QueueTicket&) = delete;
};

// What the choice of a slot looks at.
struct SlotView {
    const std::vector<int32_t>* held;  // the tokens its cache holds
    bool busy;
    uint64_t last_used;  // larger: used more recently
};

// The free slot whose held tokens share the longest prefix with `prompt`;
// among equals, the one unused longest. -1 when none is free.
int pick_slot(const std::vector<SlotView>& slots, const std::vector<int32_t>& prompt);

class SlotPool {
public:
    explicit SlotPool(int n);

    // Blocks until it is this caller's turn and a slot is free; returns the
    // slot, now busy.
    int acquire(const std::vector<int32_t>& prompt);
    void release(int slot);
    // A busy slot's cache belongs to the request holding it.
    PrefixCache& cache(int slot) { return caches_[static_cast<size_t>(slot)]; }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<PrefixCache> caches_;
    std::vector<bool> busy_;
    std::vector<uint64_t> last_used_;
    uint64_t clock_ = 0;
    uint64_t next_ticket_ = 0;
    std::deque<uint64_t> queue_;
};

}  // namespace tessera
