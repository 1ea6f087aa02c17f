// SequenceBatcher: generations in their own threads share batches, each one's
// greedy tokens are those it gets alone, a long prompt joins beside decoding
// sequences in chunks, and a failing decoder fails every waiting generation
// rather than hanging it.
#include "engine/drafter.h"
#include "engine/generation.h"
#include "engine/sequence_batcher.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <latch>
#include <thread>

namespace tessera {

namespace {

std::vector<int32_t> prompt_tokens(const Tokenizer& tokenizer, int i) {
    static const char* const kPrompts[] = {"Once upon a time", "The little dog", "Lily and Tom went to the park",
                                           "One day, a big red ball", "The sun was"};
    std::string text = kPrompts[i % 5];
    for (int r = 0; r < i / 5; ++r) text += " and then they played together in the garden";
    return tokenizer.encode(text, true);
}

GenerationParams greedy(int n) {
    GenerationParams p;
    p.n_predict = n;
    p.sampler.temperature = 0.0f;
    return p;
}

}  // namespace

TEST(SequenceBatcher, ConcurrentGenerationsEqualEachAloneAndShareBatches) {
    const LlamaModel model(test::stories260k());
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 256;
    const int n = 6;
    std::vector<std::vector<int32_t>> want(n);
    {
        LocalDecoder alone(model, config, 2);
        for (int i = 0; i < n; ++i) want[i] = generate(alone, *tokenizer, prompt_tokens(*tokenizer, i), greedy(40)).tokens;
    }
    config.n_seq = n;
    LocalDecoder decoder(model, config, 2);
    BatcherOptions options;
    options.prefill_chunk = 4;  // long prompts join in several chunks
    SequenceBatcher batcher(decoder, options);
    std::vector<std::vector<int32_t>> got(n);
    std::vector<std::thread> threads;
    std::latch begun(n);
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            batcher.begin(i);
            begun.arrive_and_wait();
            // Half start together (they share batches even on a loaded
            // machine); the rest are staggered: prompts join while others decode.
            if (i >= n / 2) std::this_thread::sleep_for(std::chrono::milliseconds(3 * i));
            got[i] = generate(batcher.sequence(i), *tokenizer, prompt_tokens(*tokenizer, i), greedy(40)).tokens;
            batcher.end(i);
        });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "generation " << i;
    const BatcherStats stats = batcher.stats();
    // Fewer batches than evals: the generations shared them.
    EXPECT_LT(stats.batches, stats.sequences);
    EXPECT_GT(stats.rows, 0u);
}

// Speculative generations (each with its own draft) share batches: their
// verifications are eval_all runs beside the others' steps and prompts; each
// one's greedy tokens are those it gets alone without a draft.
TEST(SequenceBatcher, SpeculativeGenerationsShareBatches) {
    const LlamaModel model(test::stories260k());
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 256;
    const int n = 4;
    std::vector<std::vector<int32_t>> want(n);
    {
        LocalDecoder alone(model, config, 2);
        for (int i = 0; i < n; ++i) want[i] = generate(alone, *tokenizer, prompt_tokens(*tokenizer, i), greedy(60)).tokens;
    }
    config.n_seq = n;
    LocalDecoder decoder(model, config, 2);
    SequenceBatcher batcher(decoder);
    std::vector<std::vector<int32_t>> got(n);
    std::vector<int> drafted(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            NgramDrafter drafter;
            GenerationParams params = greedy(60);
            params.drafter = &drafter;
            params.draft_max = 4;
            batcher.begin(i);
            const GenerationResult r = generate(batcher.sequence(i), *tokenizer, prompt_tokens(*tokenizer, i), params);
            batcher.end(i);
            got[i] = r.tokens;
            drafted[i] = r.drafted;
        });
    }
    for (std::thread& t : threads) t.join();
    int total_drafted = 0;
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(got[i], want[i]) << "generation " << i;
        total_drafted += drafted[i];
    }
    EXPECT_GT(total_drafted, 0);
    const BatcherStats stats = batcher.stats();
    EXPECT_LT(stats.batches, stats.sequences);
}

namespace {
// A decoder that fails every eval after the first few.
class FailingDecoder : public Decoder {
public:
    explicit FailingDecoder(Decoder& inner) : inner_(inner) {}
    const ModelHParams& hparams() const override { return inner_.hparams(); }
    int n_ctx() const override { return inner_.n_ctx(); }
    int n_seq() const override { return inner_.n_seq(); }
    const float* eval(std::span<const int32_t> t, int pos) override { return inner_.eval(t, pos); }
    const float* eval_all(std::span<const int32_t> t, int pos) override { return inner_.eval_all(t, pos); }
    const float* eval_seqs(std::span<const SeqEval> evals) override {
        if (++calls_ > 3) throw make_error("node lost");
        return inner_.eval_seqs(evals);
    }

private:
    Decoder& inner_;
    int calls_ = 0;
};
}  // namespace

TEST(SequenceBatcher, ADecoderErrorReachesEveryWaitingGeneration) {
    const LlamaModel model(test::stories260k());
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 128;
    config.n_seq = 3;
    LocalDecoder decoder(model, config, 1);
    FailingDecoder failing(decoder);
    SequenceBatcher batcher(failing);
    std::vector<std::string> errors(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
        threads.emplace_back([&, i] {
            batcher.begin(i);
            try {
                generate(batcher.sequence(i), *tokenizer, prompt_tokens(*tokenizer, i), greedy(50));
            } catch (const Error& e) {
                errors[i] = e.what();
            }
            batcher.end(i);
        });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(errors[i], "node lost") << "generation " << i;
}

}  // namespace tessera
