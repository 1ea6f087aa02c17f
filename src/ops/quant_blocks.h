// Block structs of the quantized formats, byte-for-byte as llama.cpp lays them
// out in GGUF files. Each block starts with an fp16 scale `d`.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int kQ8_0Block = 32;
inline constexpr int kQ4_0Block = 32;

// Q8_0: value = d * qs[i].
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

// Q4_0: value i (i < 16) = d * ((qs[i] & 15) - 8); value i + 16 = d * ((qs[i] >> 4) - 8).
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQ4_0Block / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

}  // namespace tessera
