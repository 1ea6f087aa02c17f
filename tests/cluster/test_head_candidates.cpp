// A worker's head rows under a sampler's need (head_candidates.h): the
// placed rows hold exactly the named tokens and each row's top-k of the rest
// (ties to the lower id, as the sampler's top-k), -inf elsewhere, checked
// against a brute-force selection on random rows full of ties; hostile needs
// and candidate frames are refused by name.
#include "cluster/session/head_candidates.h"
#include "util/error.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace tessera {

namespace {

using test::error_of;

constexpr float kNone = -std::numeric_limits<float>::infinity();

// The columns of `row` (ids first..) that a need keeps: the named ones and
// the k best of the others by (logit desc, id asc).
std::vector<bool> kept_by_brute_force(const float* row, int width, int32_t first, const LogitsNeed& need) {
    std::vector<bool> kept(static_cast<size_t>(width), false);
    std::vector<int> rest;
    for (int c = 0; c < width; ++c) {
        if (std::binary_search(need.tokens.begin(), need.tokens.end(), first + c)) {
            kept[static_cast<size_t>(c)] = true;
        } else {
            rest.push_back(c);
        }
    }
    std::sort(rest.begin(), rest.end(), [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (size_t i = 0; i < rest.size() && i < static_cast<size_t>(need.top_k); ++i) kept[static_cast<size_t>(rest[i])] = true;
    return kept;
}

}  // namespace

TEST(HeadCandidates, PlacedRowsHoldTheNamedTokensAndEachRowsTopKOfTheRest) {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 300; ++trial) {
        const int n_vocab = 1 + static_cast<int>(rng() % 700);
        const int32_t first = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
        const int width = 1 + static_cast<int>(rng() % static_cast<uint32_t>(n_vocab - first));
        const int n_tok = 1 + static_cast<int>(rng() % 3);
        // Few distinct values: ties at the k-th place are common.
        const int levels = 1 + static_cast<int>(rng() % 20);
        std::vector<float> rows(static_cast<size_t>(n_tok * width));
        for (float& v : rows) v = static_cast<float>(static_cast<int>(rng() % static_cast<uint32_t>(levels)) - 10) * 0.25f;
        LogitsNeed need;
        need.top_k = 1 + static_cast<int>(rng() % (trial % 3 == 0 ? 2 : 60));
        for (int i = static_cast<int>(rng() % 12); i > 0; --i) need.tokens.push_back(static_cast<int32_t>(rng() % n_vocab));
        std::sort(need.tokens.begin(), need.tokens.end());
        need.tokens.erase(std::unique(need.tokens.begin(), need.tokens.end()), need.tokens.end());

        std::vector<uint8_t> frame;
        encode_logits_need(&need, frame);
        LogitsNeed got;
        ASSERT_TRUE(decode_logits_need(frame, n_vocab, got, "root"));
        EXPECT_EQ(got.top_k, need.top_k);
        EXPECT_EQ(got.tokens, need.tokens);

        encode_candidates(rows.data(), n_tok, width, first, got, frame);
        const size_t stride = static_cast<size_t>(n_vocab) + 3;
        std::vector<float> placed(static_cast<size_t>(n_tok) * stride, 7.0f);
        place_candidates(frame, n_tok, width, first, need, placed.data(), stride, "worker");
        for (int t = 0; t < n_tok; ++t) {
            const float* row = rows.data() + static_cast<size_t>(t) * width;
            const std::vector<bool> kept = kept_by_brute_force(row, width, first, need);
            for (int c = 0; c < width; ++c) {
                const float got_value = placed[static_cast<size_t>(t) * stride + static_cast<size_t>(first + c)];
                const float want = kept[static_cast<size_t>(c)] ? row[c] : kNone;
                ASSERT_EQ(got_value, want) << "trial " << trial << " row " << t << " column " << c << " top " << need.top_k;
            }
            // Nothing outside the worker's columns is touched.
            for (size_t c = 0; c < stride; ++c) {
                if (c >= static_cast<size_t>(first) && c < static_cast<size_t>(first + width)) continue;
                ASSERT_EQ(placed[static_cast<size_t>(t) * stride + c], 7.0f);
            }
        }
    }
}

TEST(HeadCandidates, EveryLogitIsANeedOfNothing) {
    std::vector<uint8_t> frame;
    encode_logits_need(nullptr, frame);
    LogitsNeed need;
    EXPECT_FALSE(decode_logits_need(frame, 100, need, "root"));
    EXPECT_EQ(frame.size(), 8u);
}

TEST(HeadCandidates, HostileNeedsAreRefusedByName) {
    const auto need_frame = [](std::vector<uint32_t> words) {
        std::vector<uint8_t> out(4 * words.size());
        std::memcpy(out.data(), words.data(), out.size());  // little-endian, as the wire
        return out;
    };
    LogitsNeed need;
    const std::pair<std::vector<uint32_t>, std::string> cases[] = {
        {{40}, "truncated"},
        {{4097, 0}, "out of range"},
        {{40, 2, 5}, "out of range"},          // fewer tokens than counted
        {{40, 1, 5, 6}, "out of range"},       // more
        {{0, 1, 5}, "out of range"},           // tokens with no top-k
        {{40, 2, 7, 7}, "names token 7"},      // twice
        {{40, 2, 9, 3}, "names token 3"},      // not sorted
        {{40, 1, 100}, "names token 100"},     // outside the vocabulary
        {{40, 1, 0xffffffffu}, "names token -1"},
        {{40, 0x7fffffffu}, "out of range"},
    };
    for (const auto& [words, want] : cases) {
        const std::string e = error_of([&] { decode_logits_need(need_frame(words), 100, need, "the root 1.2.3.4:5"); });
        EXPECT_NE(e.find(want), std::string::npos) << e;
        EXPECT_NE(e.find("the root 1.2.3.4:5"), std::string::npos) << e;
    }
}

TEST(HeadCandidates, HostileCandidateFramesAreRefusedByName) {
    LogitsNeed need;
    need.top_k = 2;
    need.tokens = {12};
    const std::vector<float> row = {0.5f, 3.0f, 1.0f, 2.0f, -1.0f, 4.0f};  // ids 10..15
    std::vector<uint8_t> good;
    encode_candidates(row.data(), 1, 6, 10, need, good);
    std::vector<float> out(16);
    place_candidates(good, 1, 6, 10, need, out.data(), 16, "w");
    EXPECT_EQ(out[11], 3.0f);
    EXPECT_EQ(out[12], 1.0f);  // named
    EXPECT_EQ(out[15], 4.0f);
    EXPECT_EQ(out[13], kNone);  // 2.0 is third among the rest
    EXPECT_EQ(good.size(), 8u + 4u + 3u * 8u);

    const auto with = [&](size_t at, uint32_t value) {
        std::vector<uint8_t> bad = good;
        std::memcpy(bad.data() + at, &value, 4);
        return bad;
    };
    float nan = std::numeric_limits<float>::quiet_NaN();
    uint32_t nan_bits;
    std::memcpy(&nan_bits, &nan, 4);
    std::vector<uint8_t> trailing = good;
    trailing.push_back(0);
    std::vector<uint8_t> truncated(good.begin(), good.end() - 3);
    const std::pair<std::vector<uint8_t>, std::string> cases[] = {
        {with(0, 2), "where 1 rows of 6 were due"},
        {with(4, 7), "where 1 rows of 6 were due"},
        {with(8, 4), "at most 3 were asked"},
        {with(8, 0xffffffffu), "at most 3 were asked"},
        {with(12, 6), "column 6"},          // past the width
        {with(20, 1), "column 1"},          // not rising (the first is column 1)
        {with(16, nan_bits), "sent a non-finite value (nan"},
        {trailing, "1 bytes after"},
        {truncated, "or the frame ends"},
        {std::vector<uint8_t>(5), "where 1 rows of 6 were due"},
    };
    for (const auto& [frame, want] : cases) {
        const std::string e = error_of([&] { place_candidates(frame, 1, 6, 10, need, out.data(), 16, "worker 9 (rank 2)"); });
        EXPECT_NE(e.find(want), std::string::npos) << e;
        EXPECT_NE(e.find("worker 9 (rank 2)"), std::string::npos) << e;
    }
}

}  // namespace tessera
