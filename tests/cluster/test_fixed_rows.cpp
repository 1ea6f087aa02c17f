// Exact partials as packed integers (cluster/tensor_parallel/fixed_rows.h): random grid
// values of every magnitude round-trip bit for bit, each block takes the
// width a plain reference computes for it (so the bytes are exactly those),
// and a hostile peer's widths, truncations, trailing bytes and out-of-range
// values are refused naming it.
#include "cluster/tensor_parallel/fixed_rows.h"
#include "ops/fixed_sum.h"
#include "util/rng.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace tessera {

namespace {

// The reference: the fewest two's complement bits holding every value of a
// block, by trying widths in order.
int reference_width(const double* v, int count) {
    for (int w = 0; w <= 64; ++w) {
        bool fits = true;
        for (int i = 0; i < count && fits; ++i) {
            const auto steps = static_cast<long double>(v[i]) * 4294967296.0L;
            const long double lo = w == 0 ? 0.0L : -std::ldexp(1.0L, w - 1), hi = w == 0 ? 0.0L : std::ldexp(1.0L, w - 1) - 1;
            fits = steps >= lo && steps <= hi;
        }
        if (fits) return w;
    }
    return 65;
}

// Values as partials are: unit dot products snapped to the grid, summed.
std::vector<double> random_partial(Rng& rng, size_t n, int units) {
    std::vector<double> v(n, 0.0);
    const int scale = static_cast<int>(rng.next_u64() % 40) - 30;  // magnitudes 2^-30 .. 2^9
    for (size_t i = 0; i < n; ++i) {
        for (int u = 0; u < units; ++u) {
            const double x = (static_cast<double>(rng.next_u64() % 2000001) / 1e6 - 1.0) * std::ldexp(1.0, scale);
            v[i] += snap_to_grid(static_cast<float>(x));
        }
        if (rng.next_u64() % 17 == 0) v[i] = 0.0;
    }
    return v;
}

}  // namespace

TEST(FixedRows, RandomPartialsRoundTripInTheReferenceWidths) {
    Rng rng(22);
    for (int trial = 0; trial < 300; ++trial) {
        const size_t n = 1 + rng.next_u64() % 300;  // partial blocks at the end too
        std::vector<double> v = random_partial(rng, n, 1 + static_cast<int>(rng.next_u64() % 8));
        if (trial % 50 == 0) v.assign(n, 0.0);
        if (trial % 50 == 1) v[0] = 8 * kGridLimit;  // the largest a rank can hold
        if (trial % 50 == 2) v[n - 1] = -8 * kGridLimit;
        std::vector<uint8_t> wire;
        encode_fixed_rows(v.data(), n, wire);
        size_t want_bytes = 0;
        for (size_t b = 0; b < n; b += kFixedBlock) {
            const int count = static_cast<int>(std::min<size_t>(kFixedBlock, n - b));
            want_bytes += 1 + (static_cast<size_t>(count) * reference_width(v.data() + b, count) + 7) / 8;
        }
        ASSERT_EQ(wire.size(), want_bytes) << "trial " << trial;
        ASSERT_LE(wire.size(), fixed_rows_max_bytes(n));
        std::vector<double> back(n, -1.0);
        decode_fixed_rows(wire, n, back.data(), "peer");
        ASSERT_EQ(back, v) << "trial " << trial;
    }
}

// Every width has its own unrolled packer for whole blocks (and a plain one
// for a short last block): for each width 1..53, blocks whose values span
// exactly that width, extremes included, encode to the bytes a bit-by-bit
// reference writes and decode back.
TEST(FixedRows, EveryWidthPacksBitForBitAsTheReference) {
    Rng rng(53);
    for (int w = 1; w <= kFixedMaxBits; ++w) {
        const int64_t lo = w == 1 ? -1 : -(int64_t{1} << (w - 1)), hi = w == 1 ? 0 : (int64_t{1} << (w - 1)) - 1;
        for (const size_t n : {size_t{32}, size_t{64 + 5}}) {
            std::vector<int64_t> steps(n);
            for (size_t i = 0; i < n; ++i) {
                const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
                steps[i] = lo + static_cast<int64_t>(rng.next_u64() % span);
            }
            // Each block reaches its width: its first value is the most negative one.
            for (size_t b = 0; b < n; b += kFixedBlock) steps[b] = lo;
            steps[n - 1] = hi;
            if (w == kFixedMaxBits) {  // values are bounded by 2^51 steps, a 53-bit block's range is wider
                for (auto& s : steps) s = std::clamp<int64_t>(s, -(int64_t{1} << 51), int64_t{1} << 51);
            }
            std::vector<double> v(n);
            for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(static_cast<double>(steps[i]), -32);
            std::vector<uint8_t> want;
            for (size_t b = 0; b < n; b += kFixedBlock) {
                const int count = static_cast<int>(std::min<size_t>(kFixedBlock, n - b));
                const int width = reference_width(v.data() + b, count);
                want.push_back(static_cast<uint8_t>(width));
                std::vector<uint8_t> body((static_cast<size_t>(count) * width + 7) / 8, 0);
                for (int i = 0; i < count; ++i) {
                    const auto u = static_cast<uint64_t>(steps[b + i]);
                    for (int j = 0; j < width; ++j) {
                        const size_t bit = static_cast<size_t>(i) * width + j;
                        body[bit / 8] |= static_cast<uint8_t>(((u >> j) & 1) << (bit % 8));
                    }
                }
                want.insert(want.end(), body.begin(), body.end());
            }
            std::vector<uint8_t> wire = {0xAB};  // appended after what is there
            encode_fixed_rows(v.data(), n, wire);
            ASSERT_EQ(wire[0], 0xAB);
            ASSERT_EQ(std::vector<uint8_t>(wire.begin() + 1, wire.end()), want) << "width " << w << ", n " << n;
            std::vector<double> back(n, -1.0);
            decode_fixed_rows(std::span<const uint8_t>(wire).subspan(1), n, back.data(), "peer");
            ASSERT_EQ(back, v) << "width " << w << ", n " << n;
        }
    }
}

TEST(FixedRows, AllZeroBlocksTakeOneByte) {
    const std::vector<double> zeros(96, 0.0);
    std::vector<uint8_t> wire;
    encode_fixed_rows(zeros.data(), zeros.size(), wire);
    EXPECT_EQ(wire, std::vector<uint8_t>(3, 0));
}

TEST(FixedRows, HostileBlocksAreRefusedNamingThePeer) {
    std::vector<double> out(40);
    const auto error = [&](std::vector<uint8_t> bytes, size_t n) {
        return test::error_of([&] { decode_fixed_rows(bytes, n, out.data(), "10.0.0.7:9999"); });
    };
    EXPECT_NE(error({54}, 32).find("10.0.0.7:9999: exact partial block of 54 bits"), std::string::npos);
    EXPECT_NE(error({}, 1).find("end at value 0 of 1"), std::string::npos);
    EXPECT_NE(error({8, 1, 2}, 32).find("end inside block 0"), std::string::npos);
    EXPECT_NE(error({0, 5}, 32).find("1 bytes after"), std::string::npos);
    // 53 bits of 0x0fff...: 2^52 - 1 steps, above the bound of 2^51.
    std::vector<uint8_t> big = {53};
    std::vector<uint8_t> body(7, 0xff);
    body[6] = 0x0f;
    big.insert(big.end(), body.begin(), body.end());
    EXPECT_NE(error(big, 1).find("out of range"), std::string::npos);
}

// What exact partials cost on the wire against F64's 8 bytes: a float's
// precision, so about 4 bytes a value (printed; the width is what the data
// needs, checked above).
TEST(FixedRows, SnappedFloatsTakeAboutFourBytes) {
    Rng rng(5);
    std::vector<double> v(4096);
    for (double& x : v) {
        const double g = std::sqrt(-2.0 * std::log((rng.next_u64() % 1000000 + 1) / 1e6)) *
                         std::cos(6.283185307 * static_cast<double>(rng.next_u64() % 1000000) / 1e6);
        x = snap_to_grid(static_cast<float>(0.05 * g)) + snap_to_grid(static_cast<float>(0.03 * g));
    }
    std::vector<uint8_t> wire;
    encode_fixed_rows(v.data(), v.size(), wire);
    const double per_value = static_cast<double>(wire.size()) / static_cast<double>(v.size());
    std::printf("gaussian partials (sigma 0.08): %.2f bytes a value (F64: 8)\n", per_value);
    EXPECT_LT(per_value, 8.0);
}

}  // namespace tessera
