// Sparse attention's candidate rules: with the seed's landmark choice (kLog)
// the pair counts equal seed 001's table for its configuration; with every
// block outside the window (kAll, ours) they equal a brute-force reading of
// the rules; candidates are causal and distinct, and a window that reaches
// position 0 leaves nothing scattered.
#include "attn/sparse_pattern.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera {

TEST(SparsePattern, SeedLandmarksGiveTheSeedsPairCounts) {
    SparseOptions o;
    o.enabled = true;
    o.window = 128;
    o.block = 64;
    o.globals = 1;
    o.log_stride = true;
    o.landmarks = LandmarkMode::kLog;
    // seed 001, "Edge Complexity Summary" (8 heads, dim 64: counts per head).
    const std::pair<int64_t, uint64_t> table[] = {{512, 59778},     {1024, 129858},    {2048, 272130},
                                                  {4096, 560834},   {8192, 1146498},   {16384, 2334274},
                                                  {32768, 4742658}};
    for (const auto& [n, pairs] : table) EXPECT_EQ(sparse_pair_count(n, o), pairs) << n;
}

TEST(SparsePattern, EveryBlockOutsideTheWindowMatchesTheRulesByBruteForce) {
    Rng rng(5);
    for (int trial = 0; trial < 40; ++trial) {
        SparseOptions o;
        o.enabled = true;
        o.window = 1 + static_cast<int>(rng.next_u64() % 40);
        o.block = 1 + static_cast<int>(rng.next_u64() % 20);
        o.globals = static_cast<int>(rng.next_u64() % 4);
        o.log_stride = rng.next_u64() % 2 == 0;
        o.landmarks = static_cast<LandmarkMode>(rng.next_u64() % 3);
        SparseCandidates c;
        for (int pos = 0; pos < 300; ++pos) {
            sparse_candidates(pos, o, c);
            std::set<int> want;
            for (int j = std::max(0, pos - o.window); j <= pos; ++j) want.insert(j);
            for (int g = 0; g < o.globals && g <= pos; ++g) want.insert(g);
            for (int s = 1; o.log_stride && s <= pos; s *= 2) want.insert(pos - s);
            std::set<int> got(c.tokens.begin(), c.tokens.end());
            ASSERT_EQ(got.size(), c.tokens.size()) << "repeated tokens at " << pos;
            ASSERT_TRUE(std::is_sorted(c.tokens.begin(), c.tokens.end()));
            for (int j : c.tokens) ASSERT_LT(j, c.window_begin) << "scattered token inside the window";
            for (int j = c.window_begin; j <= pos; ++j) got.insert(j);
            ASSERT_EQ(got, want) << "pos " << pos << " window " << o.window << " globals " << o.globals;
            if (o.landmarks == LandmarkMode::kAll) {
                std::vector<int> blocks;
                for (int b = 0; (b + 1) * o.block <= pos - o.window; ++b) blocks.push_back(b);
                ASSERT_EQ(c.blocks, blocks) << "pos " << pos;
            } else if (o.landmarks == LandmarkMode::kOff) {
                ASSERT_TRUE(c.blocks.empty());
            }
            for (int b : c.blocks) ASSERT_LE((b + 1) * o.block, pos + 1) << "an incomplete block";
            if (pos <= o.window) {
                ASSERT_TRUE(c.tokens.empty());
                if (o.landmarks == LandmarkMode::kAll) ASSERT_TRUE(c.blocks.empty());
            }
        }
    }
}

TEST(SparsePattern, OutOfRangeOptionsAreNamed) {
    SparseOptions o;
    o.enabled = true;
    o.window = 0;
    EXPECT_THROW(validate(o), Error);
    o.window = 8;
    o.block = 0;
    EXPECT_THROW(validate(o), Error);
    o.block = 4;
    o.globals = -1;
    EXPECT_THROW(validate(o), Error);
    o.globals = 2;
    EXPECT_NO_THROW(validate(o));
    EXPECT_EQ(describe(o), "sparse (window 8, block 4, 2 globals, log-stride on, landmarks all)");
}

}  // namespace tessera
