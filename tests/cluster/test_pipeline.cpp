// Pipeline plans over real loopback TCP: 2 and 3 stages (root + workers,
// stage to stage directly, the last stage answering the root) give greedy
// output equal to a single node's, on stories260K and a generated GQA model,
// with micro-batched prompts; eval_all (perplexity) too.
#include "cluster/pipeline/pipeline_decoder.h"
#include "cluster/session/worker.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "test_worker.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <thread>

namespace tessera {

namespace {

using StageWorker = test::TestWorker;
using test::greedy;

// A plan of groups.size() stages, started as workers: groups[s] is how many
// tensor-parallel workers join stage s's leader.
PipelineConfig hybrid_plan(const std::string& path, const std::vector<int>& groups,
                           std::vector<std::unique_ptr<StageWorker>>& workers) {
    PipelineConfig config;
    for (size_t s = 0; s < groups.size(); ++s) {
        if (s > 0) {
            workers.push_back(std::make_unique<StageWorker>(path));
            config.stages.push_back(workers.back()->address());
        }
        config.groups.emplace_back();
        for (int g = 0; g < groups[s]; ++g) {
            workers.push_back(std::make_unique<StageWorker>(path));
            config.groups.back().push_back(workers.back()->address());
        }
    }
    return config;
}

// groups[s]: how many tensor-parallel workers join stage s's leader.
void expect_hybrid_equals_single(const std::string& path, const std::vector<int32_t>& prompt, int n,
                                 const std::vector<int>& groups, const std::vector<int>& layers = {}) {
    const LlamaModel model(path);
    ForwardConfig forward;
    forward.n_ctx = 128;
    forward.n_batch = 32;
    LocalDecoder single(model, forward, 1);
    const std::vector<int32_t> want = greedy(single, prompt, n);
    std::vector<std::unique_ptr<StageWorker>> workers;
    PipelineConfig config = hybrid_plan(path, groups, workers);
    config.forward = forward;
    config.micro_batch = 4;
    config.limits.io_timeout_ms = 3000;
    config.weights.assign(groups.size(), 1.0);
    config.layers = layers;
    PipelineDecoder pipeline(model, config);
    EXPECT_EQ(greedy(pipeline, prompt, n), want) << path;
}

void expect_pipeline_equals_single(const std::string& path, const std::vector<int32_t>& prompt, int n, int stages) {
    const LlamaModel model(path);
    ForwardConfig forward;
    forward.n_ctx = 128;
    forward.n_batch = 32;
    LocalDecoder single(model, forward, 1);
    const std::vector<int32_t> want = greedy(single, prompt, n);
    std::vector<std::unique_ptr<StageWorker>> workers;
    PipelineConfig config;
    for (int s = 1; s < stages; ++s) {
        workers.push_back(std::make_unique<StageWorker>(path));
        config.stages.push_back(workers.back()->address());
    }
    config.forward = forward;
    config.micro_batch = 4;  // several micro-batches in flight for the prompt
    config.limits.io_timeout_ms = 3000;
    config.weights.assign(static_cast<size_t>(stages), 1.0);
    PipelineDecoder pipeline(model, config);
    EXPECT_EQ(greedy(pipeline, prompt, n), want) << path << " " << stages << " stages";
}

}  // namespace

// A generated GQA model (2 KV heads for 8 query heads) of 4 layers.
static std::string gqa_model() {
    const std::string path = test::scratch_dir("pipeline") + "/gqa.gguf";
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 4;
    spec.n_head = 8;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 400;
    spec.type = QuantType::Q8_0;
    write_random_model(spec, path);
    return path;
}

TEST(Pipeline, StagesEqualSingleNodeOnStories260K) {
    const std::string path = test::stories260k();
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
    for (int stages : {2, 3}) expect_pipeline_equals_single(path, prompt, 32, stages);
}

TEST(Pipeline, StagesEqualSingleNodeOnAGeneratedGqaModel) {
    const std::string path = gqa_model();
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42, 7, 8, 9, 10};
    for (int stages : {2, 3}) expect_pipeline_equals_single(path, prompt, 20, stages);
}

// Hybrid plans: a stage is a tensor-parallel group (DESIGN.md: "every
// deployment is a plan of slices").
TEST(Pipeline, HybridPlansEqualSingleNodeOnStories260K) {
    const std::string path = test::stories260k();
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
    expect_hybrid_equals_single(path, prompt, 24, {1, 0});     // root + 1 rank, then 1 stage
    expect_hybrid_equals_single(path, prompt, 24, {0, 1});     // root, then a group of 2
    expect_hybrid_equals_single(path, prompt, 24, {1, 0}, {2, 3});  // layers given
}

TEST(Pipeline, HybridPlanEqualsSingleNodeOnAGeneratedGqaModel) {
    const std::string path = gqa_model();
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42, 7, 8, 9, 10};
    expect_hybrid_equals_single(path, prompt, 16, {1, 0});
    expect_hybrid_equals_single(path, prompt, 16, {1, 1, 0});
}

TEST(Pipeline, AStageWithTooFewLayersOrALayerCountThatDoesNotAddUpIsRefused) {
    const std::string path = test::stories260k();
    const LlamaModel model(path);
    PipelineConfig config;
    config.forward.n_ctx = 64;
    config.weights = {1.0};
    config.layers = {4};  // the model has 5
    try {
        PipelineDecoder pipeline(model, config);
        FAIL() << "a plan of 4 layers for 5 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("add up to 4, the model has 5"), std::string::npos) << e.what();
    }
}

TEST(Pipeline, EvalAllMatchesASingleNode) {
    const std::string path = test::stories260k();
    const LlamaModel model(path);
    ForwardConfig forward;
    forward.n_ctx = 64;
    forward.n_batch = 16;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % 512);
    LocalDecoder single(model, forward, 1);
    const float* a = single.eval_all(tokens, 0);
    const std::vector<float> want(a, a + tokens.size() * 512);
    StageWorker worker(path);
    PipelineConfig config;
    config.stages = {worker.address()};
    config.forward = forward;
    config.micro_batch = 16;
    config.weights = {1.0, 1.0};
    PipelineDecoder pipeline(model, config);
    const float* b = pipeline.eval_all(tokens, 0);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(b[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << i;
}

}  // namespace tessera

namespace tessera {

// Continuous batching through stages (serve --parallel on a pipeline or a
// hybrid plan): three sequences' prompts in micro-batches beside each other,
// then their decoding steps in one batch; every stage keeps a KV cache per
// sequence, and each sequence's greedy tokens equal a single node's alone.
TEST(Pipeline, SequencesBatchedThroughStagesEqualEachAlone) {
    const std::string path = gqa_model();
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {{1, 17, 230, 5, 99, 7, 8}, {1, 310, 42}, {1, 11, 12, 13, 14, 15}};
    const int steps = 8;
    ForwardConfig forward;
    forward.n_ctx = 128;
    forward.n_batch = 32;
    std::vector<std::vector<int32_t>> want;
    {
        LocalDecoder single(model, forward, 1);
        for (const auto& p : prompts) want.push_back(greedy(single, p, steps));
    }
    for (const std::vector<int>& groups : {std::vector<int>{0, 0, 0}, {0, 1}}) {
        std::vector<std::unique_ptr<StageWorker>> workers;
        PipelineConfig config = hybrid_plan(path, groups, workers);
        config.forward = forward;
        config.forward.n_seq = 3;
        config.micro_batch = 4;
        config.limits.io_timeout_ms = 3000;
        config.weights.assign(groups.size(), 1.0);
        PipelineDecoder pipeline(model, config);
        ASSERT_EQ(pipeline.n_seq(), 3);
        std::vector<std::vector<int32_t>> got(prompts.size());
        for (int step = 0; step < steps; ++step) {
            std::vector<SeqEval> evals;
            for (size_t s = 0; s < prompts.size(); ++s) {
                const int n = static_cast<int>(prompts[s].size());
                evals.push_back(step == 0 ? SeqEval{static_cast<int>(s), 0, prompts[s]}
                                          : SeqEval{static_cast<int>(s), n + step - 1,
                                                    std::span<const int32_t>(&got[s].back(), 1)});
            }
            const float* logits = pipeline.eval_seqs(evals);
            for (size_t s = 0; s < prompts.size(); ++s) {
                const float* row = logits + s * n_vocab;
                got[s].push_back(static_cast<int32_t>(std::max_element(row, row + n_vocab) - row));
            }
        }
        for (size_t s = 0; s < prompts.size(); ++s) {
            EXPECT_EQ(got[s], want[s]) << "sequence " << s << ", " << groups.size() << " stages";
        }
        // A speculative verification beside a decoding step: sequence 0's
        // next tokens with every row's logits (eval_all's), sequence 1's one
        // token; the rows come back in order and agree with a single node.
        const std::vector<int32_t> verify = {got[0].back(), 5, 9};
        const SeqEval mixed[] = {{0, static_cast<int>(prompts[0].size()) + steps - 1, verify, true},
                                 {1, static_cast<int>(prompts[1].size()) + steps - 1,
                                  std::span<const int32_t>(&got[1].back(), 1)}};
        const float* rows = pipeline.eval_seqs(mixed);
        std::vector<int32_t> single_tokens = prompts[0];
        single_tokens.insert(single_tokens.end(), got[0].begin(), got[0].end() - 1);
        LocalDecoder single(model, forward, 1);
        single.eval(single_tokens, 0);
        const float* want_rows = single.eval_all(verify, static_cast<int>(single_tokens.size()));
        for (int r = 0; r < 3; ++r) {
            EXPECT_EQ(std::max_element(rows + r * n_vocab, rows + (r + 1) * n_vocab) - (rows + r * n_vocab),
                      std::max_element(want_rows + r * n_vocab, want_rows + (r + 1) * n_vocab) - (want_rows + r * n_vocab))
                << "verification row " << r;
        }
        const float* step1 = rows + 3 * n_vocab;
        std::vector<int32_t> s1 = prompts[1];
        s1.insert(s1.end(), got[1].begin(), got[1].end());
        LocalDecoder single1(model, forward, 1);
        const float* want1 = single1.eval(s1, 0);
        EXPECT_EQ(std::max_element(step1, step1 + n_vocab) - step1, std::max_element(want1, want1 + n_vocab) - want1);
    }
}

}  // namespace tessera
