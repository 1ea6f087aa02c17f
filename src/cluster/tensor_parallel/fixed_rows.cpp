#include "cluster/tensor_parallel/fixed_rows.h"

#include "util/error.h"

#include <algorithm>
#include <array>
#include <utility>
#include <bit>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

constexpr int64_t kMaxMagnitude = int64_t{1} << 51;

// Grid values and their step counts convert through a magic number, as in
// ops/fixed_sum.h: 1.5 * 2^20 + v lies in [2^20, 2^21), where a double's
// last bit is 2^-32, for every |v| <= 2^19; its bits minus the magic's are v
// in steps of 2^-32. Packed adds and integer subtractions the compiler
// vectorizes, where a double <-> int64 conversion is scalar without AVX-512.
constexpr double kMagic = 1.5 * 1048576.0;

uint64_t bits_of(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
}
double double_of(uint64_t b) {
    double d;
    std::memcpy(&d, &b, 8);
    return d;
}

// A whole block of 32 values at width W takes exactly 4 W bytes, so its
// body is byte-aligned. These pack and unpack one, W known at compile time:
// with the loop unrolled every shift and word index is a constant, so a
// block is straight-line code (no branch per value, whose mispredictions
// made the generic loop ~2 ns a value: ~8 us for a 4096-wide partial each
// way, a third of a sync's software cost). The words live in a local array
// and are copied once, so neither side reads or writes past the block.
template <int W>
void pack_block(const int64_t* ints, uint8_t* p) {
    constexpr int kWords = (kFixedBlock * W + 63) / 64;
    constexpr uint64_t kMask = (uint64_t{1} << W) - 1;
    uint64_t words[kWords] = {};
#pragma GCC unroll 32
    for (int i = 0; i < kFixedBlock; ++i) {
        const int bit = i * W, k = bit / 64, s = bit % 64;
        const uint64_t u = static_cast<uint64_t>(ints[i]) & kMask;
        words[k] |= u << s;
        if (s + W > 64) words[k + 1] |= u >> (64 - s);
    }
    std::memcpy(p, words, 4 * W);
}

template <int W>
void unpack_block(const uint8_t* p, int64_t* ints) {
    constexpr int kWords = (kFixedBlock * W + 63) / 64;
    constexpr uint64_t kMask = (uint64_t{1} << W) - 1;
    uint64_t words[kWords] = {};
    std::memcpy(words, p, 4 * W);
#pragma GCC unroll 32
    for (int i = 0; i < kFixedBlock; ++i) {
        const int bit = i * W, k = bit / 64, s = bit % 64;
        uint64_t u = words[k] >> s;
        if (s + W > 64) u |= words[k + 1] << (64 - s);
        ints[i] = static_cast<int64_t>((u & kMask) << (64 - W)) >> (64 - W);  // sign extension
    }
}

using PackFn = void (*)(const int64_t*, uint8_t*);
using UnpackFn = void (*)(const uint8_t*, int64_t*);

// Indexed by width 1..kFixedMaxBits (entry 0 unused: zero blocks have no body).
template <size_t... W>
constexpr std::array<PackFn, sizeof...(W)> pack_table(std::index_sequence<W...>) {
    return {(W == 0 ? nullptr : &pack_block<static_cast<int>(W == 0 ? 1 : W)>)...};
}
template <size_t... W>
constexpr std::array<UnpackFn, sizeof...(W)> unpack_table(std::index_sequence<W...>) {
    return {(W == 0 ? nullptr : &unpack_block<static_cast<int>(W == 0 ? 1 : W)>)...};
}
constexpr auto kPack = pack_table(std::make_index_sequence<kFixedMaxBits + 1>{});
constexpr auto kUnpack = unpack_table(std::make_index_sequence<kFixedMaxBits + 1>{});

// A partial block (the last of a row set whose length is not a multiple of
// 32): bit by bit through a running word; rare, so kept plain.
void pack_tail(const int64_t* ints, int count, int width, uint8_t* p) {
    const size_t body = (static_cast<size_t>(count) * width + 7) / 8;
    std::memset(p, 0, body);
    const uint64_t mask = (uint64_t{1} << width) - 1;
    for (int i = 0; i < count; ++i) {
        const uint64_t u = static_cast<uint64_t>(ints[i]) & mask;
        for (int j = 0; j < width; ++j) {
            const size_t bit = static_cast<size_t>(i) * width + j;
            p[bit / 8] |= static_cast<uint8_t>(((u >> j) & 1) << (bit % 8));
        }
    }
}

void unpack_tail(const uint8_t* p, int count, int width, int64_t* ints) {
    for (int i = 0; i < count; ++i) {
        uint64_t u = 0;
        for (int j = 0; j < width; ++j) {
            const size_t bit = static_cast<size_t>(i) * width + j;
            u |= static_cast<uint64_t>((p[bit / 8] >> (bit % 8)) & 1) << j;
        }
        ints[i] = static_cast<int64_t>(u << (64 - width)) >> (64 - width);
    }
}

}  // namespace

uint64_t fixed_rows_max_bytes(uint64_t n) {
    const uint64_t blocks = (n + kFixedBlock - 1) / kFixedBlock;
    return blocks + (n * kFixedMaxBits + 7) / 8 + blocks;
}

void encode_fixed_rows(const double* values, size_t n, std::vector<uint8_t>& out) {
    const uint64_t magic = bits_of(kMagic);
    int64_t ints[kFixedBlock];
    size_t at = out.size();
    // Sized once for the widest blocks (no zero-filling per block), cut to
    // what was written at the end.
    out.resize(at + fixed_rows_max_bytes(n));
    for (size_t b = 0; b < n; b += kFixedBlock) {
        const int count = static_cast<int>(std::min<size_t>(kFixedBlock, n - b));
        uint64_t spread = 0, nonzero = 0;
        for (int i = 0; i < count; ++i) {
            const int64_t v = static_cast<int64_t>(bits_of(values[b + i] + kMagic) - magic);
            ints[i] = v;
            spread |= static_cast<uint64_t>(v ^ (v >> 63));  // |v| - (v < 0): the magnitude bits
            nonzero |= static_cast<uint64_t>(v);
        }
        // The fewest two's complement bits holding every value (0: all zero).
        const int width = nonzero == 0 ? 0 : 65 - std::countl_zero(spread);
        if (width > kFixedMaxBits) throw make_error("internal: an exact partial of {} bits", width);
        uint8_t* p = out.data() + at;
        *p++ = static_cast<uint8_t>(width);
        if (width > 0) {
            if (count == kFixedBlock) kPack[static_cast<size_t>(width)](ints, p);
            else pack_tail(ints, count, width, p);
        }
        at += 1 + (static_cast<size_t>(count) * width + 7) / 8;
    }
    out.resize(at);
}

void decode_fixed_rows(std::span<const uint8_t> bytes, size_t n, double* values, const char* peer) {
    const uint64_t magic = bits_of(kMagic);
    int64_t ints[kFixedBlock];
    size_t at = 0;
    for (size_t b = 0; b < n; b += kFixedBlock) {
        const int count = static_cast<int>(std::min<size_t>(kFixedBlock, n - b));
        if (at >= bytes.size()) throw make_error("{}: exact partial rows end at value {} of {}", peer, b, n);
        const int width = bytes[at++];
        if (width > kFixedMaxBits) throw make_error("{}: exact partial block of {} bits (at most {})", peer, width, kFixedMaxBits);
        const size_t body = (static_cast<size_t>(count) * width + 7) / 8;
        if (bytes.size() - at < body) throw make_error("{}: exact partial rows end inside block {}", peer, b / kFixedBlock);
        if (width == 0) {
            std::fill_n(values + b, count, 0.0);
            continue;
        }
        if (count == kFixedBlock) kUnpack[static_cast<size_t>(width)](bytes.data() + at, ints);
        else unpack_tail(bytes.data() + at, count, width, ints);
        // Only the widest width can hold a value beyond the bound: W bits
        // hold at most 2^(W-1) in magnitude.
        if (width == kFixedMaxBits) {
            for (int i = 0; i < count; ++i) {
                if (ints[i] > kMaxMagnitude || ints[i] < -kMaxMagnitude) {
                    throw make_error("{}: exact partial block {} holds a value out of range (beyond 2^19)", peer,
                                     b / kFixedBlock);
                }
            }
        }
        for (int i = 0; i < count; ++i) values[b + i] = double_of(static_cast<uint64_t>(ints[i]) + magic) - kMagic;
        at += body;
    }
    if (at != bytes.size()) throw make_error("{}: {} bytes after the exact partial rows", peer, bytes.size() - at);
}

}  // namespace tessera
