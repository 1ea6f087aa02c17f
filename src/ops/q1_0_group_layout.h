// Where things sit in a Q1_0 group block (16 rows of one 128-element block,
// ops/row_groups.h), 288 bytes as its 16 rows' blocks:
//   bytes [0, 32)     the 16 rows' fp16 scales, row r at 2r
//   bytes [32, 288)   Q8_0 block k (k < 4, elements 32k..32k + 31) at
//                     32 + 64k: row r's 4 bytes qs[4k .. 4k + 3] at 4r, so a
//                     vector of int32 lanes holds 32 signs of consecutive rows,
//                     element 32k + i at bit i of its row's lane
// Q2_0's group block (64 elements, the same 18-byte block shape) sits the
// same way: word k holds elements 16k..16k + 15, element 16k + 4b + j at bits
// 8b + 2j of its row's lane.
#pragma once

#include <cstdint>

namespace tessera::q1_0_group {

inline constexpr int64_t kBytes = 288;
inline constexpr int64_t kQs = 32;

}  // namespace tessera::q1_0_group
