// Generation on plans whose logits cross a wire (tensor parallel, pipeline,
// hybrid) while the nodes send only the logits the sampler reads
// (model/decoder.h LogitsNeed, cluster/session/head_candidates.h): greedy and
// sampled output, with penalties, logit biases and every truncation, equals a
// single node's token for token, and far fewer bytes arrive than whole rows.
#include "cluster/test_worker.h"
#include "cluster/pipeline/pipeline_decoder.h"
#include "cluster/tensor_parallel/tp_decoder.h"
#include "engine/generation.h"
#include "engine/sequence_batcher.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <thread>

namespace tessera {

namespace {

using test::TestWorker;

struct Generated {
    std::vector<int32_t> tokens;
    uint64_t bytes_received = 0;
};

// The plan: "single", "tp N" (ranks), "pipeline N" (stages) or "hybrid"
// (2 stages, each leader with a tensor-parallel worker).
Generated generate_on(const LlamaModel& model, const std::string& plan, const GenerationParams& params,
                      const std::vector<int32_t>& prompt) {
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig forward;
    forward.n_ctx = 256;
    forward.n_batch = 16;
    if (plan == "single") {
        LocalDecoder decoder(model, forward, 1);
        return {generate(decoder, *tokenizer, prompt, params).tokens, 0};
    }
    std::vector<std::unique_ptr<TestWorker>> workers;
    const auto worker = [&] {
        workers.push_back(std::make_unique<TestWorker>(model.path()));
        return workers.back()->address();
    };
    const int n = plan.back() - '0';
    if (plan.rfind("tp", 0) == 0) {
        TpConfig config;
        for (int r = 1; r < n; ++r) config.workers.push_back(worker());
        // Equal shares: shares that follow each run's speed probes move
        // vocab rows and channels between ranks, and with them the bytes
        // each sends the root.
        config.weights.assign(static_cast<size_t>(n), 1.0);
        config.forward = forward;
        config.limits.io_timeout_ms = 3000;
        TensorParallelDecoder decoder(model, config);
        Generated run{generate(decoder, *tokenizer, prompt, params).tokens, 0};
        run.bytes_received = decoder.stats().bytes_received;
        return run;
    }
    PipelineConfig config;
    const bool hybrid = plan == "hybrid";
    for (int s = 1; s < (hybrid ? 2 : n); ++s) config.stages.push_back(worker());
    if (hybrid) config.groups = {{worker()}, {worker()}};
    config.forward = forward;
    config.micro_batch = 4;
    config.limits.io_timeout_ms = 3000;
    PipelineDecoder decoder(model, config);
    Generated run{generate(decoder, *tokenizer, prompt, params).tokens, 0};
    for (const StageInfo& s : decoder.stages()) run.bytes_received += s.bytes_received;
    return run;
}

GenerationParams sampling(float temperature, int top_k, uint64_t seed) {
    GenerationParams params;
    params.n_predict = 48;
    params.stop_at_eos = false;
    params.sampler.temperature = temperature;
    params.sampler.top_k = top_k;
    params.sampler.seed = seed;
    return params;
}

}  // namespace

TEST(DistributedSampling, EverySamplerGivesTheSingleNodesTokens) {
    const LlamaModel model(test::stories260k());
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // BOS "Once upon a time"
    std::vector<std::pair<std::string, GenerationParams>> cases;
    cases.emplace_back("greedy", sampling(0.0f, 40, 1));
    {
        GenerationParams p = sampling(0.0f, 0, 1);
        p.sampler.repeat_penalty = 1.3f;
        p.sampler.presence_penalty = 0.5f;
        p.sampler.logit_bias = {{450, 4.0f}, {261, -100.0f}, {9999, 5.0f}};  // the last is outside the vocabulary
        cases.emplace_back("greedy with penalties and biases", p);
    }
    {
        GenerationParams p = sampling(0.9f, 40, 3);
        p.sampler.repeat_penalty = 1.2f;
        p.sampler.frequency_penalty = 0.3f;
        p.sampler.logit_bias = {{300, 2.5f}};
        cases.emplace_back("top-k 40 with penalties", p);
    }
    cases.emplace_back("top-k 3, hot", sampling(1.5f, 3, 9));
    {
        GenerationParams p = sampling(1.0f, 1000, 4);  // more than the vocabulary: every row whole
        p.sampler.top_p = 1.0f;
        p.sampler.min_p = 0.0f;
        cases.emplace_back("top-k above the vocabulary", p);
    }
    cases.emplace_back("no top-k (the workers send whole rows)", sampling(0.8f, 0, 5));
    for (const auto& [name, params] : cases) {
        const std::vector<int32_t> want = generate_on(model, "single", params, prompt).tokens;
        ASSERT_EQ(want.size(), 48u);
        for (const char* plan : {"tp 2", "tp 3", "pipeline 2", "pipeline 3", "hybrid"}) {
            EXPECT_EQ(generate_on(model, plan, params, prompt).tokens, want) << name << ", " << plan;
        }
    }
}

// serve --parallel: generations with their own samplers share batches; the
// workers send the union of what they read, and each draws its own tokens.
TEST(DistributedSampling, BatchedGenerationsWithTheirOwnSamplersGiveTheSingleNodesTokens) {
    const LlamaModel model(test::stories260k());
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    std::vector<GenerationParams> params = {sampling(0.0f, 40, 1), sampling(0.9f, 40, 3), sampling(1.5f, 3, 9),
                                            sampling(0.8f, 0, 5)};
    params[0].sampler.repeat_penalty = 1.3f;
    params[1].sampler.frequency_penalty = 0.4f;
    params[2].sampler.logit_bias = {{450, 3.0f}};
    const int n = static_cast<int>(params.size());
    const auto prompt = [&](int i) { return std::vector<int32_t>{1, 403, 407, 261 + 10 * i, 378}; };
    std::vector<std::vector<int32_t>> want(n);
    for (int i = 0; i < n; ++i) want[i] = generate_on(model, "single", params[i], prompt(i)).tokens;
    for (const bool with_all : {false, true}) {
        // with_all: the last generation reads every logit (no top-k) and joins them.
        const int m = with_all ? n : n - 1;
        TestWorker worker(model.path());
        TpConfig config;
        config.workers.push_back(worker.address());
        config.forward.n_ctx = 256;
        config.forward.n_seq = m;
        config.limits.io_timeout_ms = 3000;
        TensorParallelDecoder decoder(model, config);
        SequenceBatcher batcher(decoder, BatcherOptions{});
        std::vector<std::vector<int32_t>> got(static_cast<size_t>(m));
        std::vector<std::thread> threads;
        for (int i = 0; i < m; ++i) {
            threads.emplace_back([&, i] {
                batcher.begin(i);
                got[i] = generate(batcher.sequence(i), *tokenizer, prompt(i), params[i]).tokens;
                batcher.end(i);
            });
        }
        for (std::thread& t : threads) t.join();
        for (int i = 0; i < m; ++i) EXPECT_EQ(got[i], want[i]) << "generation " << i << (with_all ? ", with one reading all" : "");
        EXPECT_LT(batcher.stats().batches, batcher.stats().sequences);
    }
}

TEST(DistributedSampling, WorkersSendOnlyTheCandidates) {
    const LlamaModel model(test::stories260k());
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
    const GenerationParams greedy = sampling(0.0f, 40, 1);
    GenerationParams whole = greedy;
    whole.on_token = [](int32_t, const float*, int32_t) {};  // logprobs read every logit
    // Tensor parallel: two workers hold about 340 of the 512 rows, 1360
    // bytes a token as whole rows, 40 as greedy's candidates: about 63 KB
    // fewer over 48 tokens. A pipeline's last stage: 2048 bytes against 20.
    // (With equal shares the counts are the same every run: whole rows
    // would leave no difference at all.)
    for (const char* plan : {"tp 3", "pipeline 3"}) {
        const Generated sparse = generate_on(model, plan, greedy, prompt), full = generate_on(model, plan, whole, prompt);
        ASSERT_EQ(sparse.tokens, full.tokens) << plan;
        EXPECT_GT(full.bytes_received, sparse.bytes_received + 48 * 1000)
            << plan << ": " << full.bytes_received << " " << sparse.bytes_received;
    }
}

}  // namespace tessera
