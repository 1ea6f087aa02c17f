// The router of a mixture of experts against a plain reference: softmax in
// double with std::exp, experts ranked by a stable sort (probability
// descending, index ascending), the chosen weights divided by their sum.
#include "model/architecture.h"
#include "model/moe_router.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tessera {
namespace {

std::vector<ExpertChoice> reference_route(const std::vector<float>& logits, int k, bool normalize) {
    const size_t n = logits.size();
    double max = -INFINITY;
    for (float v : logits) max = std::max(max, static_cast<double>(v));
    std::vector<double> p(n);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - max);
    for (double& v : p) v /= sum;
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    std::vector<ExpertChoice> out;
    double chosen = 0.0;
    for (int i = 0; i < k; ++i) chosen += p[order[i]];
    for (int i = 0; i < k; ++i) {
        out.push_back({order[i], static_cast<float>(normalize ? p[order[i]] / chosen : p[order[i]])});
    }
    return out;
}

const Architecture& qwen3moe() { return *find_architecture("qwen3moe"); }

TEST(MoeRouter, ChoosesTheReferencesExpertsWithItsWeights) {
    Rng rng(7);
    for (int trial = 0; trial < 500; ++trial) {
        const int n = 2 + static_cast<int>(static_cast<uint32_t>(rng.next_u64()) % 127);
        const int k = 1 + static_cast<int>(static_cast<uint32_t>(rng.next_u64()) % std::min(n, 8));
        std::vector<float> logits(static_cast<size_t>(n));
        for (float& v : logits) v = 3.0f * rng.next_normal();
        const std::vector<ExpertChoice> want = reference_route(logits, k, true);
        std::vector<float> work = logits;
        std::vector<ExpertChoice> got(static_cast<size_t>(k));
        route_token(qwen3moe(), work, got);
        float sum = 0.0f;
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(got[i].expert, want[i].expert) << "trial " << trial << " choice " << i;
            EXPECT_NEAR(got[i].weight, want[i].weight, 1e-5f * std::max(1.0f, want[i].weight)) << "trial " << trial;
            sum += got[i].weight;
        }
        EXPECT_NEAR(sum, 1.0f, 1e-5f);
    }
}

TEST(MoeRouter, TiesGoToTheLowerExpert) {
    std::vector<ExpertChoice> got(3);
    std::vector<float> ties = {0.5f, 2.0f, 1.0f, 2.0f, 2.0f, -1.0f};
    route_token(qwen3moe(), ties, got);
    EXPECT_EQ(got[0].expert, 1);
    EXPECT_EQ(got[1].expert, 3);
    EXPECT_EQ(got[2].expert, 4);
    EXPECT_FLOAT_EQ(got[0].weight, 1.0f / 3.0f);
    // Every logit equal: the first k experts, equal weights.
    std::vector<float> flat(16, 0.25f);
    std::vector<ExpertChoice> two(2);
    route_token(qwen3moe(), flat, two);
    EXPECT_EQ(two[0].expert, 0);
    EXPECT_EQ(two[1].expert, 1);
    EXPECT_FLOAT_EQ(two[0].weight, 0.5f);
    // All of them chosen: weights sum to 1 in index order of probability.
    std::vector<float> all = {1.0f, 3.0f, 2.0f};
    std::vector<ExpertChoice> three(3);
    route_token(qwen3moe(), all, three);
    EXPECT_EQ(three[0].expert, 1);
    EXPECT_EQ(three[1].expert, 2);
    EXPECT_EQ(three[2].expert, 0);
}

// gpt-oss: the top k logits, then a softmax over just those k (no renormalization needed).
TEST(MoeRouter, SoftmaxWeightTakesTheTopLogitsThenTheirSoftmax) {
    const Architecture& oss = *find_architecture("gpt-oss");
    Rng rng(9);
    for (int trial = 0; trial < 200; ++trial) {
        const int n = 4 + static_cast<int>(rng.next_u64() % 60);
        const int k = 1 + static_cast<int>(rng.next_u64() % 4);
        std::vector<float> logits(static_cast<size_t>(n));
        for (float& v : logits) v = 2.0f * rng.next_normal();
        std::vector<int> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
        double sum = 0;
        for (int i = 0; i < k; ++i) sum += std::exp(static_cast<double>(logits[order[i]] - logits[order[0]]));
        std::vector<float> work = logits;
        std::vector<ExpertChoice> got(static_cast<size_t>(k));
        route_token(oss, work, got);
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(got[i].expert, order[i]) << "trial " << trial;
            EXPECT_NEAR(got[i].weight, std::exp(static_cast<double>(logits[order[i]] - logits[order[0]])) / sum, 1e-6);
        }
    }
}

TEST(MoeRouter, RefusesMoreChoicesThanExperts) {
    std::vector<float> logits = {1.0f, 2.0f};
    std::vector<ExpertChoice> got(3);
    EXPECT_THROW(route_token(qwen3moe(), logits, got), std::exception);
    std::vector<ExpertChoice> none;
    EXPECT_THROW(route_token(qwen3moe(), logits, none), std::exception);
}

}  // namespace
}  // namespace tessera
