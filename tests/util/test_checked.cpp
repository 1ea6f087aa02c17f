#include "util/checked.h"
#include "util/rng.h"

#include <gtest/gtest.h>

namespace tessera {

TEST(Checked, DetectsOverflow) {
    EXPECT_EQ(checked_add(1, 2, "x"), 3u);
    EXPECT_THROW(checked_add(UINT64_MAX, 1, "x"), Error);
    EXPECT_EQ(checked_mul(1u << 20, 1u << 20, "x"), 1ull << 40);
    EXPECT_THROW(checked_mul(1ull << 33, 1ull << 33, "x"), Error);
    EXPECT_EQ(checked_align_up(33, 32, "x"), 64u);
    EXPECT_EQ(checked_align_up(64, 32, "x"), 64u);
    EXPECT_THROW(checked_align_up(UINT64_MAX - 3, 32, "x"), Error);
}

TEST(Rng, SameSeedSameSequence) {
    Rng a(42), b(42), c(43);
    bool differs = false;
    for (int i = 0; i < 100; ++i) {
        const uint64_t x = a.next_u64();
        EXPECT_EQ(x, b.next_u64());
        differs |= x != c.next_u64();
    }
    EXPECT_TRUE(differs);
    Rng r(7);
    for (int i = 0; i < 1000; ++i) {
        const float f = r.next_float();
        ASSERT_GE(f, 0.0f);
        ASSERT_LT(f, 1.0f);
    }
}

}  // namespace tessera
