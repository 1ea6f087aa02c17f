// Exact partials on the wire: fixed-point unit sums (ops/fixed_sum.h) as
// integers in the fewest bits that hold them, losslessly.
//
// A rank's exact partial is a sum of at most 8 units, each a multiple of
// 2^-32 bounded by 2^16, so every value is an integer number of 2^-32 steps
// below 2^51 in magnitude. F64 spent 64 bits on each; the values of a
// residual's update need about 30 (a float's 24 significant bits plus the
// spread of magnitudes within a few neighbours). So values travel in blocks
// of 32, each block as one byte of width w (0..53 bits, two's complement)
// followed by 32 * w bits, little-endian: the width is measured from the
// block itself, so the encoding is exact for any value in range and never
// larger than 53 bits a value (the lossless fallback is the widest width).
//
// Decoding is hostile input: a width beyond 53 bits, a truncated block or
// bytes left over are errors naming the peer, and every decoded value is
// within the bound above (so sums of up to kMaxExactRanks ranks stay exact in
// a double).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

constexpr int kFixedBlock = 32;
constexpr int kFixedMaxBits = 53;

// Bytes that n values take at most (every block at the widest width).
uint64_t fixed_rows_max_bytes(uint64_t n);

// Appends n values (multiples of 2^-32 with |v| < 2^20) to out.
void encode_fixed_rows(const double* values, size_t n, std::vector<uint8_t>& out);

// Decodes exactly n values from bytes, which must hold exactly their blocks.
void decode_fixed_rows(std::span<const uint8_t> bytes, size_t n, double* values, const char* peer);

}  // namespace tessera
