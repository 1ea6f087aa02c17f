// Overflow-checked arithmetic for sizes and offsets read from files and the wire.
// Every count, length and offset that comes from outside passes through these
// before it is used to index memory, so a forged value becomes an Error instead
// of a wrap-around and an out-of-bounds read.
#pragma once

#include "util/error.h"

#include <cstdint>

namespace tessera {

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
    uint64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) throw make_error("size overflow computing {}", what);
    return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
    uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) throw make_error("size overflow computing {}", what);
    return r;
}

// Rounds `value` up to a multiple of `alignment` (a power of two), checked.
inline uint64_t checked_align_up(uint64_t value, uint64_t alignment, const char* what) {
    const uint64_t bumped = checked_add(value, alignment - 1, what);
    return bumped & ~(alignment - 1);
}

}  // namespace tessera
