// Where things sit in an NVFP4 group block (16 rows of one 64-element block,
// ops/row_groups.h), 576 bytes as its 16 rows' blocks:
//   bytes [0, 64)     sub-block j's UE4M3 scale byte of row r at 16j + r
//   bytes [64, 576)   Q8_0 block h (h < 2, elements 32h..32h + 31) at
//                     64 + 256h: vector k (k < 4) at + 64k, row r's 4 bytes
//                     at 4r; byte i's low nibble is the code of element
//                     32h + 4k + i (sub-block 2h), its high nibble that of
//                     32h + 16 + 4k + i (sub-block 2h + 1)
// so each half is MXFP4's code order (block32_group_layout.h), its low
// nibbles one sub-block and its high nibbles the next.
#pragma once

#include <cstdint>

namespace tessera::nvfp4_group {

inline constexpr int64_t kBytes = 576;
inline constexpr int64_t kQs = 64;

}  // namespace tessera::nvfp4_group
