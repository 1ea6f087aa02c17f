// Sequence-parallel prefill over real loopback TCP (workers serve from
// threads of the test): the chunk plan keeps a single node's batch grid, and
// 2 and 3 nodes with uneven chunks give a single node's logits bit for bit
// and the same greedy continuation, for a first prompt and for one after a
// history, with dense and sparse attention and quantized KV rows; and so
// does generation handed to a tensor-parallel group or a pipeline of the
// same nodes after the first prompt.
#include "cluster/sequence_parallel/sp_chunks.h"
#include "cluster/sequence_parallel/sp_prefill_decoder.h"
#include "model/architecture.h"
#include "model/hparams.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "test_worker.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace tessera {

namespace {

using test::greedy;
using test::TestWorker;

// Greedy decoding of two prompts, the second after the first's continuation
// (so it runs over a history): tokens and every step's logits.
struct Transcript {
    std::vector<int32_t> tokens;
    std::vector<float> logits;
};

Transcript two_prompts(Decoder& decoder, const std::vector<int32_t>& first, const std::vector<int32_t>& second, int n) {
    Transcript t;
    const int n_vocab = decoder.hparams().n_vocab;
    std::vector<int32_t> history = first;
    t.tokens = greedy(decoder, first, n, &t.logits);
    history.insert(history.end(), t.tokens.begin(), t.tokens.end() - 1);
    // The last generated token was never fed: the second prompt starts with it.
    std::vector<int32_t> feed = {t.tokens.back()};
    feed.insert(feed.end(), second.begin(), second.end());
    int pos = static_cast<int>(history.size());
    std::vector<int32_t> next(1);
    std::span<const int32_t> in = feed;
    for (int i = 0; i < n; ++i) {
        const float* logits = decoder.eval(in, pos);
        t.logits.insert(t.logits.end(), logits, logits + n_vocab);
        pos += static_cast<int>(in.size());
        next[0] = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
        t.tokens.push_back(next[0]);
        in = next;
    }
    return t;
}

// Where generation goes on after the first prompt (its second prompt runs
// there too): the root alone, a tensor-parallel group or a pipeline of the
// same nodes.
enum class HandOff { kNone, kGroup, kPipeline };

void expect_sp_equals_single(const std::string& path, const ForwardConfig& forward, const std::vector<double>& weights,
                             int first_len, int second_len, HandOff hand_off = HandOff::kNone) {
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    const std::vector<int32_t> first = test::random_prompt(first_len, n_vocab, 7);
    const std::vector<int32_t> second = test::random_prompt(second_len, n_vocab, 8);
    LocalDecoder single(model, forward, 1);
    const Transcript want = two_prompts(single, first, second, 6);

    std::vector<std::unique_ptr<TestWorker>> workers;
    SpPrefillConfig config;
    for (size_t i = 1; i < weights.size(); ++i) {
        workers.push_back(std::make_unique<TestWorker>(path));
        config.workers.push_back(workers.back()->address());
    }
    config.weights = weights;
    config.forward = forward;
    config.limits.io_timeout_ms = 3000;
    if (hand_off == HandOff::kGroup) config.group = TpConfig{};
    if (hand_off == HandOff::kPipeline) config.pipeline = PipelineConfig{};
    SpPrefillDecoder sp(model, config);
    const Transcript got = two_prompts(sp, first, second, 6);
    EXPECT_EQ(sp.prompts(), hand_off != HandOff::kNone ? 1 : 2) << "prompts that ran across the nodes";
    for (const SpNodeInfo& node : sp.nodes()) EXPECT_GT(node.last_chunk.n_tok, 0) << node.address;
    if (hand_off == HandOff::kGroup) {
        ASSERT_NE(sp.group(), nullptr) << "generation was handed to the group";
        EXPECT_EQ(sp.group()->ranks().size(), weights.size());
    }
    if (hand_off == HandOff::kPipeline) {
        ASSERT_NE(sp.pipeline(), nullptr) << "generation was handed to the pipeline";
        EXPECT_EQ(sp.pipeline()->stages().size(), weights.size());
    }
    if (hand_off != HandOff::kNone) {
        // At the first step: the first prompt and no generated token yet.
        EXPECT_EQ(sp.handoff().positions, first_len);
        // Every node but the last lacks the later chunks' rows.
        if (weights.size() > 2) {
            EXPECT_GT(sp.handoff().bytes_sent, 0u);
        }
    }
    EXPECT_EQ(got.tokens, want.tokens);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0)
        << "logits differ from a single node's bits (" << weights.size() << " nodes)";
}

std::string gqa_model() { return test::small_gqa_model(test::scratch_dir("sp_prefill") + "/gqa.gguf"); }

}  // namespace

TEST(PromptChunks, BoundariesStayOnTheBatchGridAndCoverThePrompt) {
    for (const int pos0 : {0, 17, 300}) {
        for (const int n : {1, 31, 32, 33, 200, 1000}) {
            for (const std::vector<double>& w : {std::vector<double>{1}, {1, 1}, {1, 2, 1}, {3, 1, 1, 1}, {1, 1, 1, 1, 1, 1}}) {
                const std::vector<PromptChunk> c = plan_prompt_chunks(pos0, n, 32, w);
                ASSERT_EQ(c.size(), w.size());
                int at = pos0;
                for (const PromptChunk& chunk : c) {
                    EXPECT_EQ(chunk.pos0, at);
                    EXPECT_GE(chunk.n_tok, 0);
                    if (chunk.n_tok > 0) {
                        EXPECT_EQ((chunk.pos0 - pos0) % 32, 0) << "off the grid";
                    }
                    at += chunk.n_tok;
                }
                EXPECT_EQ(at, pos0 + n);
            }
        }
    }
    // Shares follow the weights: 8 batches as 2 : 4 : 2.
    const std::vector<double> w = {1, 2, 1};
    const std::vector<PromptChunk> c = plan_prompt_chunks(0, 256, 32, w);
    EXPECT_EQ(c[0].n_tok, 64);
    EXPECT_EQ(c[1].n_tok, 128);
    EXPECT_EQ(c[2].n_tok, 64);
    EXPECT_THROW(plan_prompt_chunks(0, 10, 32, std::vector<double>{1, 0}), Error);
}

TEST(PromptChunks, ChunksBalanceTheCostOfAttentionNotThePositionCount) {
    // The 1.1B shape (TinyLlama), dense attention, a 4K prompt in batches of
    // 512 for two equal nodes: later positions attend to more of the prompt,
    // so the first node takes more positions than the second.
    ModelHParams hp;
    hp.n_embd = 2048;
    hp.n_layer = 22;
    hp.n_head = 32;
    hp.n_head_kv = 4;
    hp.head_dim = 64;
    hp.n_ff = 5632;
    const PrefillCostModel dense = prefill_cost_model(hp, SparseOptions{});
    EXPECT_NEAR(dense.pair_cost, kAttentionKernelFactor * 9.3e-5, kAttentionKernelFactor * 0.1e-5);
    const std::vector<double> costs = prefill_batch_costs(0, 4096, 512, dense);
    ASSERT_EQ(costs.size(), 8u);
    for (size_t k = 1; k < costs.size(); ++k) EXPECT_GT(costs[k], costs[k - 1]) << "batch " << k;
    const std::vector<double> two = {1, 1};
    const std::vector<PromptChunk> c = plan_prompt_chunks(0, 4096, 512, two, costs);
    EXPECT_GT(c[0].n_tok, c[1].n_tok);
    EXPECT_EQ(c[0].n_tok + c[1].n_tok, 4096);
    // The split is the batch boundary nearest to half the cost.
    double first = 0.0, all = 0.0;
    for (size_t k = 0; k < costs.size(); ++k) {
        all += costs[k];
        if (static_cast<int>(k) * 512 < c[0].n_tok) first += costs[k];
    }
    for (size_t k = 0; k < costs.size(); ++k) {
        double other = 0.0;
        for (size_t j = 0; j < k; ++j) other += costs[j];
        EXPECT_LE(std::abs(first - all / 2), std::abs(other - all / 2) + 1e-9) << "a nearer split at batch " << k;
    }
    // History before the prompt makes every batch dearer but keeps the order.
    const std::vector<double> later = prefill_batch_costs(8192, 4096, 512, dense);
    for (size_t k = 0; k < costs.size(); ++k) EXPECT_GT(later[k], costs[k]);
    // Sparse attention attends to a bounded set: costs grow far less, and the
    // chunks are nearer equal than dense's.
    SparseOptions sparse;
    sparse.enabled = true;
    const std::vector<double> sparse_costs = prefill_batch_costs(0, 4096, 512, prefill_cost_model(hp, sparse));
    EXPECT_LT(sparse_costs.back(), costs.back() / 2);
    const std::vector<PromptChunk> s = plan_prompt_chunks(0, 4096, 512, two, sparse_costs);
    EXPECT_LE(s[0].n_tok, c[0].n_tok);
    // A sliding window on every layer bounds the cost the same way.
    hp.family = find_architecture("llama");  // Mistral: every layer slides
    ASSERT_NE(hp.family, nullptr);
    hp.sliding_window = 256;
    const PrefillCostModel windowed = prefill_cost_model(hp, SparseOptions{});
    EXPECT_EQ(windowed.sliding_share, 1.0);
    const std::vector<double> w = prefill_batch_costs(0, 4096, 512, windowed);
    EXPECT_NEAR(w[7], w[6], 1e-9 * w[6]);
    EXPECT_LT(w[7], costs[7] / 2);
    // Equal costs cut as the position count does; a wrong count of costs, or
    // a cost that is not positive, is an internal error.
    const std::vector<double> flat(8, 3.0);
    const std::vector<double> w3 = {1, 2, 1};
    const std::vector<PromptChunk> f = plan_prompt_chunks(0, 4096, 512, w3, flat);
    const std::vector<PromptChunk> u = plan_prompt_chunks(0, 4096, 512, w3);
    for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i].n_tok, u[i].n_tok);
    EXPECT_THROW(plan_prompt_chunks(0, 4096, 512, two, std::vector<double>(7, 1.0)), Error);
    EXPECT_THROW(plan_prompt_chunks(0, 4096, 512, two, std::vector<double>(8, 0.0)), Error);
}

TEST(SequenceParallelPrefill, TwoAndThreeNodesGiveSingleNodeBitsOnStories260K) {
    const std::string path = test::stories260k();
    ForwardConfig forward;
    forward.n_ctx = 512;
    forward.n_batch = 32;
    expect_sp_equals_single(path, forward, {1, 1}, 150, 100);
    expect_sp_equals_single(path, forward, {1, 2, 1}, 200, 130);
}

namespace {

// The bundled model's prompts of the plain test, dense then sparse (whose
// landmarks are rebuilt in the new caches), handed over after the first.
void expect_handoff_keeps_single_node_bits(HandOff hand_off) {
    const std::string path = test::stories260k();
    ForwardConfig forward;
    forward.n_ctx = 512;
    forward.n_batch = 32;
    expect_sp_equals_single(path, forward, {1, 1}, 150, 100, hand_off);
    expect_sp_equals_single(path, forward, {1, 2, 1}, 200, 130, hand_off);
    forward.sparse.enabled = true;
    forward.sparse.window = 24;
    forward.sparse.block = 16;
    expect_sp_equals_single(path, forward, {2, 1, 1}, 220, 130, hand_off);
}

}  // namespace

TEST(SequenceParallelPrefill, GenerationHandedToATensorParallelGroupKeepsSingleNodeBits) {
    expect_handoff_keeps_single_node_bits(HandOff::kGroup);
}

TEST(SequenceParallelPrefill, GenerationHandedToAPipelineKeepsSingleNodeBits) {
    expect_handoff_keeps_single_node_bits(HandOff::kPipeline);
}

TEST(SequenceParallelPrefill, SparseAttentionLandmarksTravelWithTheRows) {
    const std::string path = test::stories260k();
    ForwardConfig forward;
    forward.n_ctx = 512;
    forward.n_batch = 32;
    forward.sparse.enabled = true;
    forward.sparse.window = 24;
    forward.sparse.block = 16;
    expect_sp_equals_single(path, forward, {2, 1, 1}, 220, 130);
}

TEST(SequenceParallelPrefill, QuantizedCacheRowsTravelAsTheyAre) {
    const std::string path = gqa_model();
    ForwardConfig forward;
    forward.n_ctx = 256;
    forward.n_batch = 16;
    forward.kv_types = {QuantType::Q8_0, QuantType::Q4_0};
    expect_sp_equals_single(path, forward, {1, 1, 1}, 100, 60);
    // Handed to a group whose ranks hold different numbers of KV heads.
    expect_sp_equals_single(path, forward, {1, 2, 1}, 100, 60, HandOff::kGroup);
    expect_sp_equals_single(path, forward, {1, 2, 1}, 100, 60, HandOff::kPipeline);
}

TEST(SequenceParallelPrefill, RefusesWhatItCannotKeepExact) {
    const std::string path = gqa_model();
    const LlamaModel model(path);
    SpPrefillConfig config;
    config.forward.n_ctx = 64;
    config.forward.track_attention = true;
    EXPECT_THROW(SpPrefillDecoder(model, config), Error);
}

}  // namespace tessera

