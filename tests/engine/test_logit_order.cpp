// The radix order of a vocabulary's logits against the comparison sort it
// replaces, on random logits with many ties, both zeros, infinities and NaN,
// from no token to a 200k vocabulary; and the sampler's whole distribution
// in that order.
#include "engine/logit_order.h"
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tessera {

namespace {

// Logits of n tokens: normal values, some rounded so that many tie, and a
// share of the specials.
std::vector<float> hostile_logits(int32_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::uniform_int_distribution<int> pick(0, 99);
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                              std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()};
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) {
        const int k = pick(rng);
        if (k < 5) {
            v = specials[static_cast<size_t>(pick(rng)) % std::size(specials)];
        } else if (k < 40) {
            v = std::round(normal(rng));  // ties
        } else {
            v = normal(rng);
        }
    }
    return x;
}

}  // namespace

TEST(LogitOrder, EqualsTheComparisonSort) {
    std::vector<int32_t> got, want;
    std::vector<uint64_t> scratch;
    uint32_t seed = 1;
    for (int32_t n : {0, 1, 2, 3, 17, 1000, 2049, 32000, 201088}) {
        for (int round = 0; round < 3; ++round) {
            const std::vector<float> x = hostile_logits(n, seed++);
            order_by_logit(x.data(), n, got, scratch);
            order_by_logit_reference(x.data(), n, want);
            ASSERT_EQ(got, want) << n << " tokens, round " << round;
        }
    }
    // Every logit the same (each pass's digit shared), and all refused.
    for (float v : {1.5f, -0.0f, -std::numeric_limits<float>::infinity()}) {
        const std::vector<float> x(5000, v);
        order_by_logit(x.data(), 5000, got, scratch);
        order_by_logit_reference(x.data(), 5000, want);
        ASSERT_EQ(got, want) << v;
    }
}

TEST(LogitOrder, TheSamplersWholeDistributionFollowsIt) {
    SamplerParams p;
    p.temperature = 0.7f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    const std::vector<float> x = hostile_logits(50000, 99);
    // +inf logits make every probability NaN; the order is what is checked.
    const auto& d = s.distribution(x.data(), 50000);
    std::vector<int32_t> want;
    order_by_logit_reference(x.data(), 50000, want);
    ASSERT_EQ(d.size(), want.size());
    for (size_t i = 0; i < d.size(); ++i) {
        ASSERT_EQ(d[i].id, want[i]) << i;
        ASSERT_EQ(std::memcmp(&d[i].logit, &x[static_cast<size_t>(want[i])], sizeof(float)), 0) << i;
    }
}

TEST(LogitOrder, AVocabularyWithNothingToDrawGivesTokenZero) {
    // Every logit NaN or refused: token 0 with certainty, with top-k on or off.
    const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN()};
    for (int top_k : {0, 2, 40}) {
        SamplerParams p;
        p.temperature = 0.8f;
        p.top_k = top_k;
        Sampler s(p);
        const auto& d = s.distribution(x.data(), 3);
        ASSERT_EQ(d.size(), 1u) << top_k;
        EXPECT_EQ(d[0].id, 0);
        EXPECT_EQ(d[0].p, 1.0f);
        EXPECT_EQ(s.sample(x.data(), 3), 0);
    }
}

}  // namespace tessera
