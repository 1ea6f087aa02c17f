// Blocks live at any byte offset (a row in a mapped file, a slice of a row),
// so the scalar kernels copy them in and out through memcpy, never through a
// cast of the pointer.
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

template <typename Block>
Block load_block(const void* base, int64_t index) {
    Block block;
    std::memcpy(&block, static_cast<const uint8_t*>(base) + index * static_cast<int64_t>(sizeof(Block)), sizeof block);
    return block;
}

template <typename Block>
void store_block(void* base, int64_t index, const Block& block) {
    std::memcpy(static_cast<uint8_t*>(base) + index * static_cast<int64_t>(sizeof(Block)), &block, sizeof block);
}

// A row's dot product as its blocks' canonical steps in order (each type's
// scalar reference): acc = step(w block, x block, acc) over n / block elements.
template <typename WBlock, typename XBlock, float (*kStep)(const WBlock&, const XBlock&, float)>
float dot_by_block_steps(int64_t n, int64_t block, const void* w, const void* x) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n / block; ++b) acc = kStep(load_block<WBlock>(w, b), load_block<XBlock>(x, b), acc);
    return acc;
}

}  // namespace tessera
