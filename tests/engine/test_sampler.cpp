#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

namespace tessera {

namespace {
std::vector<float> ramp(int n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 1.3f) * 3.0f;
    return v;
}
}  // namespace

TEST(Sampler, GreedyIsArgmaxAndIgnoresNan) {
    std::vector<float> logits = {0.1f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 1.9f};
    SamplerParams p;
    p.temperature = 0.0f;
    Sampler s(p);
    EXPECT_EQ(s.sample(logits.data(), 4), 1);
    std::vector<float> all_nan(3, std::numeric_limits<float>::quiet_NaN());
    const int32_t t = s.sample(all_nan.data(), 3);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 3);
}

TEST(Sampler, SameSeedSameTokens) {
    const std::vector<float> logits = ramp(100);
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 123;
    Sampler a(p), b(p);
    p.seed = 124;
    Sampler c(p);
    bool differs = false;
    for (int i = 0; i < 200; ++i) {
        const int32_t x = a.sample(logits.data(), 100);
        EXPECT_EQ(x, b.sample(logits.data(), 100));
        differs |= x != c.sample(logits.data(), 100);
    }
    EXPECT_TRUE(differs);
}

// With temperature 1 and no truncation, draws follow softmax(logits).
TEST(Sampler, FollowsTheDistribution) {
    const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};  // p = 1/8, 2/8, 5/8
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    std::map<int32_t, int> counts;
    const int n = 40000;
    for (int i = 0; i < n; ++i) counts[s.sample(logits.data(), 3)]++;
    EXPECT_NEAR(counts[0] / double(n), 0.125, 0.01);
    EXPECT_NEAR(counts[1] / double(n), 0.25, 0.01);
    EXPECT_NEAR(counts[2] / double(n), 0.625, 0.01);
}

TEST(Sampler, TruncationsKeepOnlyTheHead) {
    // Distinct logits 0.1 apart, in scrambled order.
    std::vector<float> logits(50);
    for (int i = 0; i < 50; ++i) logits[static_cast<size_t>(i)] = static_cast<float>((i * 7) % 50) * 0.1f;
    const int32_t best = Sampler::argmax(logits.data(), 50);
    for (int variant = 0; variant < 3; ++variant) {
        SamplerParams p;
        p.temperature = 5.0f;  // flat, so only truncation can force the argmax
        p.top_k = variant == 0 ? 1 : 0;
        p.top_p = variant == 1 ? 1e-6f : 1.0f;
        p.min_p = variant == 2 ? 0.999f : 0.0f;
        Sampler s(p);
        for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits.data(), 50), best) << "variant " << variant;
    }
    // top-k 3 draws only among the 3 largest.
    SamplerParams p;
    p.temperature = 5.0f;
    p.top_k = 3;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (int i = 0; i < 200; ++i) EXPECT_GE(logits[static_cast<size_t>(s.sample(logits.data(), 50))], sorted[2]);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
    const std::vector<float> logits = {1.0f, 1.2f, -0.5f};
    SamplerParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = 1.5f;
    Sampler s(p);
    EXPECT_EQ(s.sample(logits.data(), 3), 1);
    s.accept(1);  // 1.2 / 1.5 = 0.8 < 1.0
    EXPECT_EQ(s.sample(logits.data(), 3), 0);
}

// Presence subtracts once per seen token, frequency once per occurrence.
TEST(Sampler, PresenceAndFrequencyPenalties) {
    const std::vector<float> logits = {1.0f, 1.5f, 0.9f};
    SamplerParams p;
    p.temperature = 0.0f;
    p.presence_penalty = 0.4f;
    {
        Sampler s(p);
        s.accept(1);
        s.accept(1);
        EXPECT_EQ(s.sample(logits.data(), 3), 1);  // 1.5 - 0.4 = 1.1 > 1.0
    }
    p.frequency_penalty = 0.2f;
    {
        Sampler s(p);
        s.accept(1);
        s.accept(1);
        EXPECT_EQ(s.sample(logits.data(), 3), 0);  // 1.5 - 0.4 - 2 * 0.2 = 0.7 < 1.0
        s.accept(0);
        EXPECT_EQ(s.sample(logits.data(), 3), 2);  // 1.0 - 0.6 = 0.4, 0.7 and 0.9
    }
}

}  // namespace tessera

namespace tessera {

// OpenAI's logit_bias: -100 bans the argmax, +100 forces a token even when
// sampling, and ids outside the vocabulary are ignored; the caller's logits
// are left as they were.
TEST(Sampler, LogitBiasBansAndForcesTokens) {
    std::vector<float> logits = {0.5f, 3.0f, 1.0f, -2.0f};
    const std::vector<float> original = logits;
    SamplerParams p;
    p.temperature = 0.0f;
    p.logit_bias = {{1, -100.0f}, {7, 5.0f}};
    Sampler banned(p);
    EXPECT_EQ(banned.sample(logits.data(), 4), 2);
    p.temperature = 1.0f;
    p.logit_bias = {{3, 100.0f}};
    Sampler forced(p);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(forced.sample(logits.data(), 4), 3);
    EXPECT_EQ(logits, original);
}

}  // namespace tessera
