#include "engine/logit_order.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

namespace tessera {

namespace {

// A float's bits as an unsigned number that sorts the floats in descending
// order: ascending order of the usual sign-flip key, inverted. -0 becomes +0
// first, since the comparison order holds them equal.
uint32_t descending_key(float v) {
    const uint32_t bits = std::bit_cast<uint32_t>(v == 0.0f ? 0.0f : v);
    const uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
    return ~ascending;
}

bool enters(float v) { return v > -std::numeric_limits<float>::infinity(); }

}  // namespace

void order_by_logit(const float* x, int32_t n, std::vector<int32_t>& ids, std::vector<uint64_t>& scratch) {
    // Each entry: the key in the high 32 bits, the id in the low. The
    // entries start in id order and every pass is stable, so sorting by the
    // key alone leaves equal keys by id: four passes of 8 bits (256 buckets
    // stay in the caches of a small board's CPU, where 2048 did no better
    // here), each one read and one scattered write of the entries.
    constexpr int kDigitBits = 8, kPasses = 4;
    constexpr uint32_t kBuckets = 1u << kDigitBits;
    std::array<std::array<uint32_t, kBuckets>, kPasses> counts{};
    scratch.clear();
    for (int32_t i = 0; i < n; ++i) {
        if (!enters(x[i])) continue;
        const uint32_t key = descending_key(x[i]);
        for (int p = 0; p < kPasses; ++p) ++counts[static_cast<size_t>(p)][(key >> (p * kDigitBits)) & (kBuckets - 1)];
        scratch.push_back(static_cast<uint64_t>(key) << 32 | static_cast<uint32_t>(i));
    }
    const size_t m = scratch.size();
    scratch.resize(2 * m);
    uint64_t* from = scratch.data();
    uint64_t* to = scratch.data() + m;
    for (int p = 0; p < kPasses; ++p) {
        auto& count = counts[static_cast<size_t>(p)];
        // A digit every entry shares moves nothing.
        if (std::find(count.begin(), count.end(), static_cast<uint32_t>(m)) != count.end()) continue;
        uint32_t offset = 0;
        for (uint32_t& c : count) {
            const uint32_t here = c;
            c = offset;
            offset += here;
        }
        const int shift = 32 + p * kDigitBits;
        for (size_t i = 0; i < m; ++i) to[count[(from[i] >> shift) & (kBuckets - 1)]++] = from[i];
        std::swap(from, to);
    }
    ids.resize(m);
    for (size_t i = 0; i < m; ++i) ids[i] = static_cast<int32_t>(from[i] & 0xffffffffu);
}

void order_by_logit_reference(const float* x, int32_t n, std::vector<int32_t>& ids) {
    ids.clear();
    for (int32_t i = 0; i < n; ++i) {
        if (enters(x[i])) ids.push_back(i);
    }
    std::sort(ids.begin(), ids.end(), [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
}

}  // namespace tessera
