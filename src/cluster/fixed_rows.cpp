#include "cluster/fixed_rows.h"

#include "util/error.h"

#include <algorithm>
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

}  // namespace

uint64_t fixed_rows_max_bytes(uint64_t n) {
    const uint64_t blocks = (n + kFixedBlock - 1) / kFixedBlock;
    return blocks + (n * kFixedMaxBits + 7) / 8 + blocks;
}

void encode_fixed_rows(const double* values, size_t n, std::vector<uint8_t>& out) {
    const uint64_t magic = bits_of(kMagic);
    int64_t ints[kFixedBlock];
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
    const uint64_t magic = bits_of(kMagic);
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
        const size_t readable = bytes.size() - at;  // bytes after a block belong to the next: masked off
        const uint64_t mask = (uint64_t{1} << width) - 1;
        const int shift = 64 - width;  // sign extension
        uint64_t out_of_range = 0;
        for (int i = 0; i < count; ++i) {
            // At most 53 bits from bit 0..7 of a byte: inside the 8 bytes from
            // that byte (fewer at the very end of the payload).
            const size_t bit = static_cast<size_t>(i) * width;
            const size_t byte = bit / 8;
            uint64_t word = 0;
            if (byte + 8 <= readable) std::memcpy(&word, p + byte, 8);
            else std::memcpy(&word, p + byte, readable - byte);
            const int64_t v = static_cast<int64_t>(((word >> (bit % 8)) & mask) << shift) >> shift;
            out_of_range |= static_cast<uint64_t>(v > kMaxMagnitude || v < -kMaxMagnitude);
            values[b + i] = double_of(static_cast<uint64_t>(v) + magic) - kMagic;
        }
        if (out_of_range != 0) {
            throw make_error("{}: exact partial block {} holds a value out of range (beyond 2^19)", peer, b / kFixedBlock);
        }
        at += body;
    }
    if (at != bytes.size()) throw make_error("{}: {} bytes after the exact partial rows", peer, bytes.size() - at);
}

}  // namespace tessera
