// Where things sit in a TQ2_0 or TQ1_0 group block (16 rows of one
// 256-element block, ops/row_groups.h), the bytes of its 16 rows' blocks:
//   bytes [0, 32)   the 16 rows' fp16 scales, row r at 2r
//   then word k of every row at kWords + 64k, row r's at + 4r: the block's
//   code bytes 4k .. 4k + 3 (TQ2_0: qs, 16 words; TQ1_0: qs then qh, 13
//   words), so a vector of int32 lanes holds those bytes of consecutive rows.
// Each byte's codes (TQ2_0: 4 pairs of bits; TQ1_0: 5 or 4 trits) stand for
// elements 4 consecutive apart in the activations, byte b of a word at
// element + b (kquant_blocks.h), so a word's code l of its 4 bytes meets 4
// consecutive activation codes.
#pragma once

#include <cstdint>

namespace tessera::ternary_group {

inline constexpr int64_t kWords = 32;
inline constexpr int64_t kTq2_0Words = 16;
inline constexpr int64_t kTq1_0Words = 13;
inline constexpr int64_t bytes_of(int64_t words) { return kWords + 64 * words; }

}  // namespace tessera::ternary_group
