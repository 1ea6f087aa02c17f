#include "util/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera {

// Every finite half survives half -> float -> half unchanged.
TEST(Fp16, RoundTripsEveryHalf) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
            continue;
        }
        EXPECT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
    }
}

TEST(Fp16, KnownValues) {
    EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
    EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
    EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);  // saturates to infinity
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
}

// Conversion rounds to nearest, ties to even.
TEST(Fp16, RoundsToNearestEven) {
    const float one = 1.0f;
    const float ulp = std::ldexp(1.0f, -10);
    EXPECT_EQ(fp32_to_fp16(one + ulp * 0.5f), 0x3c00);         // tie -> even (1.0)
    EXPECT_EQ(fp32_to_fp16(one + ulp * 1.5f), 0x3c02);         // tie -> even (1 + 2 ulp)
    EXPECT_EQ(fp32_to_fp16(one + ulp * 0.5001f), 0x3c01);      // above the tie
}

}  // namespace tessera
