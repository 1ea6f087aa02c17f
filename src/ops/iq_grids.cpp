// The grid I-quants' point sets and their quantizers' search tables
// (iq_grids.h).
#include "ops/iq_grids.h"

#include "util/error.h"

#include <array>

namespace tessera {

namespace {

#include "ops/iq_grid_tables.inc"

// A point's packed levels as bytes through a type's level -> byte table.
template <typename Entry, int kLevels, int kBits, size_t N>
std::array<Entry, N> expand(const uint16_t (&points)[N], const uint8_t* level_byte) {
    std::array<Entry, N> out{};
    for (size_t i = 0; i < N; ++i) {
        Entry e = 0;
        for (int k = 0; k < kLevels; ++k) {
            const int level = (points[i] >> (kBits * k)) & ((1 << kBits) - 1);
            e |= static_cast<Entry>(level_byte[level]) << (8 * k);
        }
        out[i] = e;
    }
    return out;
}

// The bytes each level stands for (ggml-common.h's grids; the generator
// checks these against them).
constexpr uint8_t kIq2Bytes[4] = {8, 25, 43, 0};
constexpr uint8_t kIq3xxsBytes[8] = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr uint8_t kIq3sBytes[8] = {1, 3, 5, 7, 9, 11, 13, 15};
constexpr uint8_t kOddBytes[8] = {1, 3, 5, 7, 9, 11, 13, 15};
constexpr uint8_t kIq1Bytes[4] = {0xFF, 0, 1, 0};  // -1, 0, 1 as int8
constexpr uint8_t kIq1ShiftedBytes[4] = {0xF9, 1, 9, 0};  // 8 l + 1: -7, 1, 9 as int8

const auto kIq2xxs = expand<uint64_t, 8, 2>(kIq2xxsPoints, kIq2Bytes);
const auto kIq2xs = expand<uint64_t, 8, 2>(kIq2xsPoints, kIq2Bytes);
const auto kIq2s = expand<uint64_t, 8, 2>(kIq2sPoints, kIq2Bytes);
const auto kIq3xxs = expand<uint32_t, 4, 3>(kIq3xxsPoints, kIq3xxsBytes);
const auto kIq3s = expand<uint32_t, 4, 3>(kIq3sPoints, kIq3sBytes);
const auto kIq1Points8 = expand<uint64_t, 8, 2>(kIq1sPoints, kIq1Bytes);
const auto kIq1Shifted8 = expand<uint64_t, 8, 2>(kIq1sPoints, kIq1ShiftedBytes);

const std::array<uint64_t, 256> kSignMasks = [] {
    std::array<uint64_t, 256> masks{};
    for (int s = 0; s < 256; ++s) {
        for (int k = 0; k < 8; ++k) {
            if (s & (1 << k)) masks[s] |= uint64_t{0xFF} << (8 * k);
        }
    }
    return masks;
}();

const std::array<uint64_t, 128> kEvenSignMasks = [] {
    std::array<uint64_t, 128> masks{};
    for (int s = 0; s < 128; ++s) masks[s] = kSignMasks[iq_signs_from7(s)];
    return masks;
}();

// llama.cpp's neighbour lists: for each packed level vector not in the set,
// the points at the n_want smallest distinct squared distances (levels as
// odd numbers 2 l + 1), by distance then index.
template <size_t N>
IqGridSearch build_search(const uint16_t (&points)[N], int levels, int bits, int map_size, int n_want) {
    IqGridSearch s;
    s.levels_per_point = levels;
    s.bits_per_level = bits;
    s.odd.resize(N);
    const int mask = (1 << bits) - 1;
    std::vector<int8_t> pts(N * static_cast<size_t>(levels));
    for (size_t i = 0; i < N; ++i) {
        uint64_t e = 0;
        for (int k = 0; k < levels; ++k) {
            const int l = (points[i] >> (bits * k)) & mask;
            pts[i * levels + k] = static_cast<int8_t>(2 * l + 1);
            e |= static_cast<uint64_t>(kOddBytes[l]) << (8 * k);
        }
        s.odd[i] = e;
    }
    s.map.assign(static_cast<size_t>(map_size), -1);
    for (size_t i = 0; i < N; ++i) s.map[points[i]] = static_cast<int32_t>(i);
    const int max_d2 = levels * (2 * mask) * (2 * mask);
    std::vector<int> d2(N);
    std::vector<int> count(static_cast<size_t>(max_d2) + 1);
    for (int u = 0; u < map_size; ++u) {
        if (s.map[u] >= 0) continue;
        int8_t pos[8];
        for (int k = 0; k < levels; ++k) pos[k] = static_cast<int8_t>(2 * ((u >> (bits * k)) & mask) + 1);
        std::fill(count.begin(), count.end(), 0);
        for (size_t j = 0; j < N; ++j) {
            int d = 0;
            for (int k = 0; k < levels; ++k) {
                const int diff = pts[j * levels + k] - pos[k];
                d += diff * diff;
            }
            d2[j] = d;
            ++count[d];
        }
        s.map[u] = -static_cast<int32_t>(s.neighbours.size() + 1);
        const size_t head = s.neighbours.size();
        s.neighbours.push_back(0);
        int found = 0;
        for (int d = 0; d <= max_d2 && found < n_want; ++d) {
            if (count[d] == 0) continue;
            ++found;
            for (size_t j = 0; j < N; ++j) {
                if (d2[j] == d) s.neighbours.push_back(static_cast<uint16_t>(j));
            }
        }
        s.neighbours[head] = static_cast<uint16_t>(s.neighbours.size() - head - 1);
    }
    return s;
}

}  // namespace

const uint64_t* iq2_points(QuantType type) {
    switch (type) {
        case QuantType::IQ2_XXS: return kIq2xxs.data();
        case QuantType::IQ2_XS: return kIq2xs.data();
        case QuantType::IQ2_S: return kIq2s.data();
        default: throw make_error("{} has no 8-level point set", quant_type_name(type));
    }
}

const uint32_t* iq3_points(QuantType type) {
    switch (type) {
        case QuantType::IQ3_XXS: return kIq3xxs.data();
        case QuantType::IQ3_S: return kIq3s.data();
        default: throw make_error("{} has no 4-level point set", quant_type_name(type));
    }
}

const uint16_t* iq_point_codes(QuantType type, int* count) {
    switch (type) {
        case QuantType::IQ2_XXS: *count = 256; return kIq2xxsPoints;
        case QuantType::IQ2_XS: *count = 512; return kIq2xsPoints;
        case QuantType::IQ2_S: *count = 1024; return kIq2sPoints;
        case QuantType::IQ3_XXS: *count = 256; return kIq3xxsPoints;
        case QuantType::IQ3_S: *count = 512; return kIq3sPoints;
        case QuantType::IQ1_S:
        case QuantType::IQ1_M: *count = 2048; return kIq1sPoints;
        default: throw make_error("{} is not a grid I-quant", quant_type_name(type));
    }
}

const uint64_t* iq1_points() { return kIq1Points8.data(); }
const uint64_t* iq1_shifted_points() { return kIq1Shifted8.data(); }

uint8_t iq_signs_from7(int bits7) {
    const int b = bits7 & 127;
    return static_cast<uint8_t>(b | ((__builtin_popcount(static_cast<unsigned>(b)) & 1) << 7));
}

const uint64_t* iq_sign_masks() { return kSignMasks.data(); }
const uint64_t* iq_sign_masks_even() { return kEvenSignMasks.data(); }

const IqGridSearch& iq_grid_search(QuantType type) {
    // 43692 packed 2-bit vectors cover every level vector IQ2's search can
    // make (levels 0..2); 4096 every 3-bit one.
    switch (type) {
        case QuantType::IQ2_XXS: {
            static const IqGridSearch s = build_search(kIq2xxsPoints, 8, 2, 43692, 2);
            return s;
        }
        case QuantType::IQ2_XS: {
            static const IqGridSearch s = build_search(kIq2xsPoints, 8, 2, 43692, 2);
            return s;
        }
        case QuantType::IQ2_S: {
            static const IqGridSearch s = build_search(kIq2sPoints, 8, 2, 43692, 1);
            return s;
        }
        case QuantType::IQ3_XXS: {
            static const IqGridSearch s = build_search(kIq3xxsPoints, 4, 3, 4096, 2);
            return s;
        }
        case QuantType::IQ3_S: {
            static const IqGridSearch s = build_search(kIq3sPoints, 4, 3, 4096, 3);
            return s;
        }
        case QuantType::IQ1_S:
        case QuantType::IQ1_M: {
            static const IqGridSearch s = build_search(kIq1sPoints, 8, 2, 43692, 3);
            return s;
        }
        default: throw make_error("{} is not a grid I-quant", quant_type_name(type));
    }
}

}  // namespace tessera
