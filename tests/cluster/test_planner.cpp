// The tensor-parallel planner: any node count, uneven weights, every KV head,
// FFN channel and row of the output head owned by exactly one rank, granules never split, and the
// ranks' footprints adding up to the model.
#include "cluster/planner/planner.h"
#include "cluster/planner/speed_probe.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace tessera {

// Probe times to weights: equal nodes stay equal through timer noise, slower
// ones get quarters of the fastest's share, never below a quarter.
TEST(Planner, WeightsFromProbesIgnoreNoiseAndFollowRealDifferences) {
    EXPECT_EQ(weights_from_probes(std::vector<double>{1.0, 1.15}), (std::vector<double>{1.0, 1.0}));
    EXPECT_EQ(weights_from_probes(std::vector<double>{1.2, 1.0, 1.1}), (std::vector<double>{1.0, 1.0, 1.0}));
    EXPECT_EQ(weights_from_probes(std::vector<double>{1.0, 2.0}), (std::vector<double>{1.0, 0.5}));
    EXPECT_EQ(weights_from_probes(std::vector<double>{1.0, 1.4}), (std::vector<double>{1.0, 0.75}));
    EXPECT_EQ(weights_from_probes(std::vector<double>{3.0, 30.0}), (std::vector<double>{1.0, 0.25}));
}

TEST(Planner, ApportionIsProportionalAndComplete) {
    const std::vector<double> w = {1.0, 2.0, 1.0};
    EXPECT_EQ(apportion(4, w), (std::vector<int>{1, 2, 1}));
    EXPECT_EQ(apportion(176, std::vector<double>{1, 1, 1}), (std::vector<int>{59, 59, 58}));
    for (int n : {0, 1, 5, 31, 176}) {
        for (const std::vector<double>& ws : {std::vector<double>{1}, {3, 1}, {1, 1, 1, 1, 1}, {0.5, 2.5, 1}}) {
            const std::vector<int> s = apportion(n, ws);
            ASSERT_EQ(std::accumulate(s.begin(), s.end(), 0), n);
            const double total = std::accumulate(ws.begin(), ws.end(), 0.0);
            for (size_t i = 0; i < ws.size(); ++i) EXPECT_LT(std::abs(s[i] - n * ws[i] / total), 1.0);
        }
    }
    EXPECT_THROW(apportion(4, std::vector<double>{1, 0}), Error);
    EXPECT_THROW(apportion(4, std::vector<double>{}), Error);
}

TEST(Planner, TensorParallelCoversEveryHeadAndChannelOnce) {
    ModelHParams hp;
    hp.n_layer = 3;
    hp.n_head = 32;
    hp.n_head_kv = 4;
    hp.n_ff = 5632;
    hp.head_dim = 64;
    hp.n_vocab = 32001;  // not a multiple of the vocab granule
    for (size_t ranks = 1; ranks <= 8; ++ranks) {
        std::vector<double> w(ranks, 1.0);
        w[0] = 1.5;  // uneven
        const std::vector<Slice> plan = plan_tensor_parallel(hp, w, ReductionUnits{1, 256});
        ASSERT_EQ(plan.size(), ranks);
        int head = 0, ffn = 0, vocab = 0;
        for (size_t r = 0; r < ranks; ++r) {
            const Slice& s = plan[r];
            EXPECT_EQ(s.layer_begin, 0);
            EXPECT_EQ(s.layer_end, 3);
            EXPECT_EQ(s.kv_head_begin, head);
            EXPECT_EQ(s.ffn_begin, ffn);
            EXPECT_EQ(s.ffn_begin % 256, 0);
            EXPECT_EQ(s.embeds, r == 0);
            EXPECT_EQ(s.outputs, r == 0);
            EXPECT_EQ(s.vocab_begin, vocab);
            EXPECT_EQ(s.vocab_begin % kVocabGranule, 0);
            EXPECT_GT(s.n_vocab_rows(), 0);
            head = s.kv_head_end;
            ffn = s.ffn_end;
            vocab = s.vocab_end;
        }
        EXPECT_EQ(head, 4);
        EXPECT_EQ(ffn, 5632);
        EXPECT_EQ(vocab, 32001);
        // The heavier root takes the larger share of the head.
        if (ranks > 1) {
            EXPECT_GT(plan[0].n_vocab_rows(), plan[1].n_vocab_rows());
        }
    }
    // stories260K's 172 channels: granules of 32, the last one short.
    hp.n_ff = 172;
    const std::vector<Slice> plan = plan_tensor_parallel(hp, std::vector<double>{1, 1, 1}, ReductionUnits{1, 32});
    EXPECT_EQ(plan[2].ffn_end, 172);
    EXPECT_EQ(plan[1].ffn_begin % 32, 0);
}

// Qwen3-30B-A3B's experts (128 of 768 channels, 8 used) in a small model.
static ModelHParams qwen3_30b_experts() {
    ModelHParams hp;
    hp.n_layer = 2;
    hp.n_head = 32;
    hp.n_head_kv = 4;
    hp.n_ff = 768;
    hp.head_dim = 128;
    hp.n_vocab = 1000;
    hp.n_expert = 128;
    hp.n_expert_used = 8;
    return hp;
}

// The expert split: whole experts per rank in proportion to the weights,
// every channel; a rank without experts computes no FFN. The channel split
// gives every rank every expert.
TEST(Planner, MixtureOfExpertsSplitsByChannelsOrByWholeExperts) {
    ModelHParams hp = qwen3_30b_experts();
    const ReductionUnits units{1, 256};
    for (const std::vector<double>& w : {std::vector<double>{1, 1}, {1, 2, 1}, {3, 1, 1, 1}}) {
        const std::vector<Slice> by_experts = plan_tensor_parallel(hp, w, units, MoeSplit::kExperts);
        const std::vector<int> shares = apportion(hp.n_expert, w);
        int expert = 0;
        for (size_t r = 0; r < w.size(); ++r) {
            const Slice& s = by_experts[r];
            EXPECT_EQ(s.expert_begin, expert);
            EXPECT_EQ(s.n_experts(), shares[r]);
            EXPECT_EQ(s.ffn_begin, 0);
            EXPECT_EQ(s.ffn_end, hp.n_ff);
            EXPECT_NO_THROW(validate_slice(s, hp));
            expert = s.expert_end;
        }
        EXPECT_EQ(expert, hp.n_expert);
        for (const Slice& s : plan_tensor_parallel(hp, w, units, MoeSplit::kChannels)) {
            EXPECT_EQ(s.expert_begin, 0);
            EXPECT_EQ(s.expert_end, hp.n_expert);
        }
    }
    // More ranks than experts: the last ones compute no FFN.
    hp.n_expert = 2;
    hp.n_expert_used = 1;
    const std::vector<Slice> few = plan_tensor_parallel(hp, std::vector<double>{1, 1, 1}, units, MoeSplit::kExperts);
    EXPECT_EQ(few[2].n_experts(), 0);
    EXPECT_EQ(few[2].n_ffn(), 0);
    EXPECT_NO_THROW(validate_slice(few[2], hp));
}

// The mixed split: as many groups of experts as ranks, each group's units
// dealt from another rank; every channel of every expert on exactly one
// rank, and further parts only where the groups' shares differ.
TEST(Planner, MixedSplitCoversEveryExpertsChannelsOnce) {
    ModelHParams hp = qwen3_30b_experts();
    const ReductionUnits units{1, 256};
    for (const std::vector<double>& w : {std::vector<double>{1, 1}, {1, 2, 1}, {3, 1, 1, 1}, {1, 1, 1, 1, 1}}) {
        std::vector<int> covered(static_cast<size_t>(hp.n_expert * hp.n_ff), 0);
        for (const Slice& s : plan_tensor_parallel(hp, w, units, MoeSplit::kMixed)) {
            EXPECT_NO_THROW(validate_slice(s, hp)) << describe_slice(s);
            EXPECT_EQ(s.ffn_begin % units.ffn_channels, 0);
            for (const ExpertPart& t : s.tails) EXPECT_EQ(t.ffn_begin % units.ffn_channels, 0);
            for (const ExpertPart& p : expert_parts(s)) {
                for (int e = p.expert_begin; e < p.expert_end; ++e) {
                    for (int c = p.ffn_begin; c < p.ffn_end; ++c) ++covered[static_cast<size_t>(e * hp.n_ff + c)];
                }
            }
        }
        EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), hp.n_expert * hp.n_ff);
    }
    // Two equal ranks, three units: 2 + 1 of the first half, 1 + 2 of the second.
    const std::vector<Slice> two = plan_tensor_parallel(hp, std::vector<double>{1, 1}, units, MoeSplit::kMixed);
    EXPECT_EQ(expert_parts(two[0]).size(), 2u);
    EXPECT_NE(describe_slice(two[0]).find("FFN channels [0, 512), experts [0, 64) and channels [512, 768) of experts [64, 128)"),
              std::string::npos)
        << describe_slice(two[0]);
    EXPECT_NE(describe_slice(two[1]).find("FFN channels [512, 768), experts [0, 64) and channels [0, 512) of experts [64, 128)"),
              std::string::npos)
        << describe_slice(two[1]);
    // Four ranks: four groups of 32 experts, each rank one unit of three of
    // them (rank 0 none of the second group's).
    const std::vector<Slice> four = plan_tensor_parallel(hp, std::vector<double>{1, 1, 1, 1}, units, MoeSplit::kMixed);
    for (const Slice& s : four) EXPECT_EQ(expert_parts(s).size(), 3u) << describe_slice(s);
    EXPECT_NE(describe_slice(four[0]).find("FFN channels [0, 256), experts [0, 32) and channels [512, 768) of experts "
                                           "[64, 96) and channels [256, 512) of experts [96, 128)"),
              std::string::npos)
        << describe_slice(four[0]);
    // Units that divide evenly: the channel split itself, one part.
    for (const Slice& s : plan_tensor_parallel(hp, std::vector<double>{1, 1}, ReductionUnits{1, 32}, MoeSplit::kMixed)) {
        EXPECT_FALSE(s.has_tail());
        EXPECT_EQ(s.n_experts(), hp.n_expert);
    }
    // Further parts must hold channels of their own, inside the model: the
    // same experts only in other channels.
    Slice bad = two[0];
    bad.tails[0].expert_begin = 32;  // experts [32, 64) of the first part too, other channels
    EXPECT_NO_THROW(validate_slice(bad, hp));
    bad.tails[0].ffn_begin = 256;  // and now channels [256, 512) of them twice
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = four[0];
    bad.tails[1].expert_begin = 80;  // experts [80, 96) of the part before it, other channels
    EXPECT_NO_THROW(validate_slice(bad, hp));
    bad.tails[1].ffn_end = hp.n_ff;  // and channels [512, 768) of them twice
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = two[0];
    bad.tails[0].ffn_end = hp.n_ff + 256;
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = two[0];
    bad.tails[0].expert_end = hp.n_expert + 1;
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = two[0];
    bad.tails[0].ffn_end = bad.tails[0].ffn_begin;  // an empty part
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = two[0];
    bad.ffn_end = bad.ffn_begin;  // further parts without a first
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad = two[0];
    bad.tails.assign(kMaxExpertParts, ExpertPart{64, 65, 0, 256});
    EXPECT_THROW(validate_slice(bad, hp), Error);
    ModelHParams dense = hp;
    dense.n_expert = 0;
    dense.n_expert_used = 0;
    bad = full_slice(dense);
    bad.tails.push_back({0, 1, 0, 256});
    EXPECT_THROW(validate_slice(bad, dense), Error);
}

// The expected load of the busiest rank: the channel split's is its largest
// share of k experts' channels; the expert split's the mean of the busiest
// rank's count of a token's k experts, which for two equal ranks is
// k/2 + E|X - k/2| with X hypergeometric (n experts, n/2 on rank 0, k drawn):
// computed exactly here, against the planner's sample of routings.
// The balanced split: every rank its even share of every expert's units, and
// the units left over held by every rank, dealt per token. Over random
// routings, every chosen expert's every channel is computed by exactly one
// rank, and every rank computes the same number of units.
TEST(Planner, BalancedSplitComputesEveryChosenChannelOnceAndEvenly) {
    ModelHParams hp = qwen3_30b_experts();
    const ReductionUnits units{1, 256};  // 3 units an expert
    const int k = hp.n_expert_used;
    Rng rng(5);
    // (Six units of 128 channels over four ranks: one each, two shared.)
    const std::vector<std::pair<std::vector<double>, ReductionUnits>> cases = {
        {{1, 1}, units}, {{2, 1}, units}, {{1, 1, 1, 1}, ReductionUnits{1, 128}}};
    for (const auto& [w, u] : cases) {
        SCOPED_TRACE(w.size());
        const std::vector<Slice> slices = plan_tensor_parallel(hp, w, u, MoeSplit::kBalanced);
        for (const Slice& s : slices) EXPECT_TRUE(s.has_tail()) << describe_slice(s);
        ASSERT_EQ(slices.size(), w.size());
        for (const Slice& s : slices) EXPECT_NO_THROW(validate_slice(s, hp)) << describe_slice(s);
        for (int trial = 0; trial < 200; ++trial) {
            // k distinct experts in a random (router's) order.
            std::vector<int> chosen;
            while (static_cast<int>(chosen.size()) < k) {
                const int e = static_cast<int>(rng.next_u64() % static_cast<uint64_t>(hp.n_expert));
                if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
            }
            std::vector<int> computed(static_cast<size_t>(hp.n_expert * hp.n_ff), 0);
            std::vector<int> load(slices.size(), 0);
            for (size_t r = 0; r < slices.size(); ++r) {
                for (const ExpertPart& p : expert_parts(slices[r])) {
                    int in_part = 0;
                    for (const int e : chosen) {
                        if (!p.contains(e) || !p.my_turn(in_part++)) continue;
                        for (int c = p.ffn_begin; c < p.ffn_end; ++c) ++computed[static_cast<size_t>(e * hp.n_ff + c)];
                        load[r] += p.n_ffn();
                    }
                }
            }
            for (int e = 0; e < hp.n_expert; ++e) {
                const bool is_chosen = std::find(chosen.begin(), chosen.end(), e) != chosen.end();
                for (int c = 0; c < hp.n_ff; ++c) {
                    ASSERT_EQ(computed[static_cast<size_t>(e * hp.n_ff + c)], is_chosen ? 1 : 0)
                        << "expert " << e << " channel " << c;
                }
            }
            if (w[0] == w.back()) {
                // Equal ranks: as many channels each, every token (two ranks:
                // 12 of the 24 units; four: 2 + 2 x 8 / 4 each of 6 x 8).
                EXPECT_EQ(*std::min_element(load.begin(), load.end()), *std::max_element(load.begin(), load.end()));
            }
        }
    }
    // Two equal ranks: one unit each, the third on both, turns 0 and 1 of 2.
    const std::vector<Slice> two = plan_tensor_parallel(hp, std::vector<double>{1, 1}, units, MoeSplit::kBalanced);
    EXPECT_NE(describe_slice(two[0]).find("FFN channels [0, 256), experts [0, 128) and channels [512, 768) of experts "
                                          "[0, 128) (turn 0 of 2)"),
              std::string::npos)
        << describe_slice(two[0]);
    EXPECT_NE(describe_slice(two[1]).find("FFN channels [256, 512), experts [0, 128) and channels [512, 768) of "
                                          "experts [0, 128) (turn 1 of 2)"),
              std::string::npos)
        << describe_slice(two[1]);
    // Units that divide evenly: the channel split itself.
    for (const Slice& s : plan_tensor_parallel(hp, std::vector<double>{1, 1, 1}, units, MoeSplit::kBalanced)) {
        EXPECT_FALSE(s.has_tail()) << describe_slice(s);
    }
    // Fewer units than ranks: a rank would hold none of its own; refused by name.
    try {
        plan_tensor_parallel(hp, std::vector<double>{1, 1, 1, 1}, units, MoeSplit::kBalanced);
        FAIL() << "four ranks over three units were planned";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--moe-split balanced"), std::string::npos) << e.what();
    }
    // Turns outside their deal are refused.
    Slice bad = two[0];
    bad.tails[0].deal_index = 2;
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad.tails[0].deal_index = -1;
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad.tails[0].deal_index = 0;
    bad.tails[0].deal_count = 0;
    EXPECT_THROW(validate_slice(bad, hp), Error);
    bad.tails[0].deal_count = kMaxExpertParts + 1;
    EXPECT_THROW(validate_slice(bad, hp), Error);
}

TEST(Planner, ExpectedExpertLoadMatchesTheHypergeometricMean) {
    ModelHParams hp = qwen3_30b_experts();
    const std::vector<double> two = {1, 1};
    const ReductionUnits units{1, 256};  // 768 channels: 3 units, shares of 512 and 256
    EXPECT_NEAR(expected_expert_load(hp, two, units, MoeSplit::kChannels), 8.0 * 512 / 768, 1e-9);
    const auto choose = [](int n, int k) {
        double c = 1.0;
        for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
        return c;
    };
    const int n = hp.n_expert, k = hp.n_expert_used, half = n / 2;
    double exact = 0.0;
    for (int x = 0; x <= k; ++x) {
        exact += std::max(x, k - x) * choose(half, x) * choose(n - half, k - x) / choose(n, k);
    }
    EXPECT_NEAR(expected_expert_load(hp, two, units, MoeSplit::kExperts), exact, 0.02 * exact);
    // The mixed split: rank 0 holds 2 of 3 units of the first half's experts
    // and 1 of the second's, rank 1 the reverse, so the busiest holds
    // (k + max(X, k - X)) / 3 experts' worth, X as above.
    EXPECT_NEAR(expected_expert_load(hp, two, units, MoeSplit::kMixed), (k + exact) / 3, 0.02 * (k + exact) / 3);
    // The balanced split: one unit of every expert each, and the third dealt
    // 4 and 4: exactly k / 2 for every routing.
    EXPECT_NEAR(expected_expert_load(hp, two, units, MoeSplit::kBalanced), k / 2.0, 1e-9);
    // 4.36 against 5.1 (whole experts) and 5.33 (3 units over 2 ranks); never
    // the balanced split, whose shared units cost memory.
    EXPECT_EQ(choose_moe_split(hp, two, units), MoeSplit::kMixed);
    // Not where a rank computes on a GPU (its forward takes one rectangle).
    EXPECT_EQ(choose_moe_split(hp, two, units, false), MoeSplit::kExperts);
    EXPECT_LT(expected_expert_load(hp, two, units, MoeSplit::kExperts),
              expected_expert_load(hp, two, units, MoeSplit::kChannels));
    // With 32-channel units (24 of them) the channel split is exact: 4 each.
    EXPECT_EQ(choose_moe_split(hp, two, ReductionUnits{1, 32}), MoeSplit::kChannels);
    EXPECT_EQ(choose_moe_split(hp, std::vector<double>{1}, units), MoeSplit::kChannels);
    hp.n_expert = 0;
    EXPECT_EQ(expected_expert_load(hp, two, units, MoeSplit::kExperts), 0.0);
}

TEST(Planner, BalancedSplitIsTakenWhereItsMemoryFits) {
    ModelHParams hp = qwen3_30b_experts();
    const std::vector<double> two = {1, 1};
    const ReductionUnits units{1, 256};  // 3 units over 2 ranks: the third is dealt
    const GroupScope whole;
    int asked = 0;
    std::vector<Slice> offered;
    const auto answer = [&](bool fits) {
        return [&asked, &offered, fits](std::span<const Slice> slices) {
            ++asked;
            offered.assign(slices.begin(), slices.end());
            return fits;
        };
    };
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, units, true, whole, answer(true)), MoeSplit::kBalanced);
    // It was asked about the balanced slices: the third unit on both ranks, dealt.
    ASSERT_EQ(offered.size(), 2u);
    for (size_t r = 0; r < offered.size(); ++r) {
        ASSERT_TRUE(offered[r].has_tail()) << describe_slice(offered[r]);
        EXPECT_EQ(offered[r].tails[0].deal_count, 2);
        EXPECT_EQ(offered[r].tails[0].deal_index, static_cast<int>(r));
    }
    // A pipeline stage's group is asked about its own layers' slices.
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, units, true, GroupScope::stage({10, 20}, false, true),
                                             answer(true)),
              MoeSplit::kBalanced);
    ASSERT_EQ(offered.size(), 2u);
    EXPECT_EQ(offered[0].layer_begin, 10);
    EXPECT_EQ(offered[1].layer_end, 20);
    EXPECT_TRUE(offered[0].outputs);
    EXPECT_EQ(offered[1].n_vocab_rows(), 0);
    EXPECT_TRUE(offered[1].has_tail());
    // Short of memory: the split choose_moe_split takes.
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, units, true, whole, answer(false)), MoeSplit::kMixed);
    EXPECT_EQ(asked, 3);
    // Not asked where it cannot help or cannot run: units that divide (the
    // channel split), a rank with no unit of its own, a rank on a GPU, one
    // rank, a dense model.
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, ReductionUnits{1, 32}, true, whole, answer(true)), MoeSplit::kChannels);
    EXPECT_EQ(choose_moe_split_within_memory(hp, std::vector<double>(3, 1.0), units, true, whole, answer(true)),
              MoeSplit::kChannels);
    EXPECT_EQ(choose_moe_split_within_memory(hp, std::vector<double>(4, 1.0), units, true, whole, answer(true)),
              choose_moe_split(hp, std::vector<double>(4, 1.0), units));
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, units, false, whole, answer(true)), MoeSplit::kExperts);
    EXPECT_EQ(choose_moe_split_within_memory(hp, std::vector<double>{1}, units, true, whole, answer(true)), MoeSplit::kChannels);
    hp.n_expert = 0;
    hp.n_expert_used = 0;
    EXPECT_EQ(choose_moe_split_within_memory(hp, two, units, true, whole, answer(true)), MoeSplit::kChannels);
    EXPECT_EQ(asked, 3);
}

TEST(Planner, FootprintsOfTheRanksAddUpToTheModel) {
    const std::string dir = test::scratch_dir("planner");
    RandomModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = 2;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = 384;
    spec.n_vocab = 300;
    spec.type = QuantType::Q8_0;
    write_random_model(spec, dir + "/m.gguf");
    const LlamaModel model(dir + "/m.gguf");
    EXPECT_EQ(reduction_units(model).ffn_channels, 64);  // 12 granules of 32 in at most 8 units
    EXPECT_EQ(reduction_units(model).kv_heads, 1);
    const SliceFootprint full = slice_footprint(model, full_slice(model.hparams()), 64, QuantType::F16);
    uint64_t model_bytes = 0;
    for (const auto& t : model.file().tensors()) {
        if (t.n_dims == 2) model_bytes += t.n_bytes;
    }
    EXPECT_EQ(full.weight_bytes, model_bytes);
    EXPECT_EQ(full.kv_bytes, 2ull * 2 * 4 * 16 * 64 * 2);
    const std::vector<Slice> plan = plan_tensor_parallel(model.hparams(), std::vector<double>{1, 2, 1}, reduction_units(model));
    uint64_t sum = 0, kv = 0;
    for (const Slice& s : plan) {
        const SliceFootprint f = slice_footprint(model, s, 64, QuantType::F16);
        sum += f.weight_bytes;
        kv += f.kv_bytes;
    }
    EXPECT_EQ(sum, full.weight_bytes);
    EXPECT_EQ(kv, full.kv_bytes);
}

// A stage of a pipeline keeps its head whole on the last group's root: the
// stage sends the logits on in one message.
TEST(Planner, StageGroupsDoNotSplitTheHead) {
    ModelHParams hp;
    hp.n_layer = 4;
    hp.n_head = 8;
    hp.n_head_kv = 4;
    hp.n_ff = 256;
    hp.head_dim = 16;
    hp.n_vocab = 500;
    const std::vector<double> w = {1, 1, 1};
    for (bool last : {false, true}) {
        const std::vector<Slice> group = plan_stage_group(hp, {2, 4}, w, ReductionUnits{1, 32}, false, last);
        for (size_t r = 0; r < group.size(); ++r) {
            EXPECT_EQ(group[r].vocab_begin, 0);
            EXPECT_EQ(group[r].vocab_end, last && r == 0 ? 500 : 0);
            EXPECT_EQ(group[r].outputs, last && r == 0);
        }
    }
}

// Ranks of one machine share its memory: their shares add up against the
// least free memory any of them reported, with the planner's margin.
TEST(Planner, SharesOfOneMachineAddUp) {
    const uint64_t gib = uint64_t{1} << 30;
    const uint64_t have = 10 * gib;
    const uint64_t half = (have - headroom_margin(have)) / 2;
    EXPECT_TRUE(shares_fit_hosts(std::vector<HostShare>{{"", half, have}, {"", half, have}}));
    EXPECT_FALSE(shares_fit_hosts(std::vector<HostShare>{{"", half, have}, {"", half + 1, have}}));
    // The least report counts: a later rank saw less free.
    EXPECT_FALSE(shares_fit_hosts(std::vector<HostShare>{{"", half, have}, {"", half, have - gib}}));
    // Two machines: each its own.
    EXPECT_TRUE(shares_fit_hosts(std::vector<HostShare>{{"", 2 * half, have}, {"10.0.0.2", 2 * half, have}}));
    EXPECT_FALSE(shares_fit_hosts(std::vector<HostShare>{{"", 2 * half, have}, {"10.0.0.2", 2 * half + 1, have}}));
    EXPECT_TRUE(shares_fit_hosts(std::vector<HostShare>{}));
}

}  // namespace tessera
