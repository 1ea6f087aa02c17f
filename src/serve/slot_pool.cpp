#include "serve/slot_pool.h"

#include <algorithm>

namespace tessera {

int pick_slot(const std::vector<SlotView>& slots, const std::vector<int32_t>& prompt) {
    int best = -1;
    size_t best_common = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
        if (slots[s].busy) continue;
        const std::vector<int32_t>& held = *slots[s].held;
        size_t common = 0;
        while (common < held.size() && common < prompt.size() && held[common] == prompt[common]) ++common;
        if (best < 0 || common > best_common ||
            (common == best_common && slots[s].last_used < slots[static_cast<size_t>(best)].last_used)) {
            best = static_cast<int>(s);
            best_common = common;
        }
    }
    return best;
}

SlotPool::SlotPool(int n)
    : caches_(static_cast<size_t>(n)), busy_(static_cast<size_t>(n), false), last_used_(static_cast<size_t>(n), 0) {}

int SlotPool::acquire(const std::vector<int32_t>& prompt) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t ticket = next_ticket_++;
    queue_.push_back(ticket);
    changed_.wait(lock, [&] {
        return queue_.front() == ticket && std::find(busy_.begin(), busy_.end(), false) != busy_.end();
    });
    queue_.pop_front();
    std::vector<SlotView> views;
    views.reserve(caches_.size());
    for (size_t s = 0; s < caches_.size(); ++s) views.push_back({&caches_[s].tokens(), busy_[s], last_used_[s]});
    const int best = pick_slot(views, prompt);
    busy_[static_cast<size_t>(best)] = true;
    last_used_[static_cast<size_t>(best)] = ++clock_;
    changed_.notify_all();  // the next in line may take another free slot
    return best;
}

void SlotPool::release(int slot) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_[static_cast<size_t>(slot)] = false;
    }
    changed_.notify_all();
}

}  // namespace tessera
