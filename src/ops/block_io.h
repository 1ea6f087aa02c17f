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

}  // namespace tessera
