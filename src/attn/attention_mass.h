// How much attention each cached position of a sequence has received, summed
// over every query, head and layer a process computes: what heavy-hitter
// (H2O) eviction ranks positions by. Weights are added in fixed point (2^-32
// units), so totals do not depend on the order heads ran in, nor on how heads
// and layers are split between processes: every plan sums the same integers
// and evicts the same positions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace tessera {

class AttentionMass {
public:
    AttentionMass(int n_ctx, int n_threads);

    // A query's softmax weight on position `pos`, from thread `thread` (each
    // thread has its own counters: no atomics).
    void add(int thread, int pos, float weight) { rows_[index(thread, pos)] += to_units(weight); }
    // A landmark's weight, spread evenly over its block's positions.
    void add_spread(int thread, int first, int n, float weight);

    // Adds every thread's totals of positions [0, n) to out[0 .. n).
    void add_totals(int n, int64_t* out) const;
    // Position kept[j] becomes position j (kept strictly increasing), and
    // positions from kept.size() on start again from zero.
    void compact(std::span<const int> kept);
    // Positions [first, first + n) hold new rows: their mass starts again.
    void reset(int first, int n);

    static int64_t to_units(float weight) { return static_cast<int64_t>(static_cast<double>(weight) * 4294967296.0 + 0.5); }

private:
    size_t index(int thread, int pos) const { return static_cast<size_t>(thread) * n_ctx_ + static_cast<size_t>(pos); }
    int n_ctx_;
    int n_threads_;
    std::unique_ptr<int64_t[]> rows_;  // [thread][pos]
};

}  // namespace tessera
