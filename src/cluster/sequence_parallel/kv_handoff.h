// Generation handed from sequence-parallel prefill to a tensor-parallel group
// in the same session: every node prefilled into a cache of the whole model,
// and each rank keeps only its own heads' rows of it. The rows are taken out
// first, so the whole model's forward (weights and cache) can be released
// before the rank's slice is loaded: a node never holds both at once.
#pragma once

#include "model/slice.h"
#include "model/slice_forward.h"

#include <cstdint>
#include <vector>

namespace tessera {

struct HeldKvRows {
    Slice slice;        // whose heads and layers these are
    int positions = 0;  // positions [0, positions) of sequence 0
    std::vector<std::vector<uint8_t>> layers;  // per layer of the slice: its heads' rows, head after head
    uint64_t bytes() const;
};

// The rows of `to`'s layers and KV heads, positions [0, positions), from a
// forward whose slice covers them (an Error otherwise).
HeldKvRows take_kv_rows(const SliceForward& from, const Slice& to, int positions);

// Stores them in a forward of that very slice (landmarks recomputed as the
// rows complete their blocks).
void put_kv_rows(SliceForward& to, const HeldKvRows& rows);

}  // namespace tessera
