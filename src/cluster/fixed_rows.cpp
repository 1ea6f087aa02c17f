#include "cluster/fixed_rows.h"

#include "util/error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace tessera {

namespace {

constexpr double kSteps = 4294967296.0;          // 2^32: grid steps per unit
constexpr double kStep = 1.0 / 4294967296.0;     // 2^-32
constexpr int64_t kMaxMagnitude = int64_t{1} << 51;

// Bits a two's complement field needs for v (0 for v == 0).
int bits_for(int64_t v) {
    const uint64_t m = static_cast<uint64_t>(v ^ (v >> 63));  // |v| - (v < 0)
    return v == 0 ? 0 : 65 - std::countl_zero(m);
}

}  // namespace

uint64_t fixed_rows_max_bytes(uint64_t n) {
    const uint64_t blocks = (n + kFixedBlock - 1) / kFixedBlock;
    return blocks + (n * kFixedMaxBits + 7) / 8 + blocks;
}

void encode_fixed_rows(const double* values, size_t n, std::vector<uint8_t>& out) {
    int64_t ints[kFixedBlock];
    for (size_t b = 0; b < n; b += kFixedBlock) {
        const int count = static_cast<int>(std::min<size_t>(kFixedBlock, n - b));
        int width = 0;
        for (int i = 0; i < count; ++i) {
            // Exact: the value is a multiple of 2^-32, so times 2^32 it is an
            // integer a double holds.
            ints[i] = static_cast<int64_t>(values[b + i] * kSteps);
            width = std::max(width, bits_for(ints[i]));
        }
        if (width > kFixedMaxBits) throw make_error("internal: an exact partial of {} bits", width);
        const size_t start = out.size();
        const size_t body = (static_cast<size_t>(count) * width + 7) / 8;
        out.resize(start + 1 + body + 8);  // 8 bytes of room for whole-word stores
        uint8_t* p = out.data() + start;
        *p++ = static_cast<uint8_t>(width);
        if (width > 0) {
            const uint64_t mask = (uint64_t{1} << width) - 1;
            uint64_t acc = 0;
            int filled = 0;
            for (int i = 0; i < count; ++i) {
                const uint64_t u = static_cast<uint64_t>(ints[i]) & mask;
                acc |= u << filled;
                filled += width;
                if (filled >= 64) {
                    std::memcpy(p, &acc, 8);
                    p += 8;
                    filled -= 64;
                    acc = filled == 0 ? 0 : u >> (width - filled);
                }
            }
            std::memcpy(p, &acc, 8);  // the tail (inside the room reserved above)
        }
        out.resize(start + 1 + body);
    }
}

void decode_fixed_rows(std::span<const uint8_t> bytes, size_t n, double* values, const char* peer) {
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
        const uint8_t* p = bytes.data() + at;
        const uint64_t mask = (uint64_t{1} << width) - 1;
        const int shift = 64 - width;  // sign extension
        uint64_t bit = 0;
        for (int i = 0; i < count; ++i, bit += width) {
            // At most 53 bits from bit 0..7 of a byte: inside the 8 bytes (or
            // fewer, at the end of the block) from that byte.
            const size_t byte = bit / 8;
            uint64_t word = 0;
            std::memcpy(&word, p + byte, std::min<size_t>(8, body - byte));
            const uint64_t u = (word >> (bit % 8)) & mask;
            const int64_t v = static_cast<int64_t>(u << shift) >> shift;
            if (v > kMaxMagnitude || v < -kMaxMagnitude) {
                throw make_error("{}: exact partial value {} steps is out of range", peer, v);
            }
            values[b + i] = static_cast<double>(v) * kStep;
        }
        at += body;
    }
    if (at != bytes.size()) throw make_error("{}: {} bytes after the exact partial rows", peer, bytes.size() - at);
}

}  // namespace tessera
