// Continuous batching (LocalDecoder::eval_seqs): several sequences, each with
// its own KV cache, go through the model in one batch, and every sequence's
// logits are the bits it gets when it runs alone. Greedy answers served to
// many clients at once then equal each one served alone.
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tessera {

namespace {

std::vector<int32_t> prompt_of(int seed, int length, int n_vocab) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < length; ++i) tokens.push_back((i * 37 + seed * 101 + 11) % n_vocab);
    return tokens;
}

int argmax(const float* logits, int n) {
    int best = 0;
    for (int v = 1; v < n; ++v) {
        if (logits[v] > logits[best]) best = v;
    }
    return best;
}

// What one sequence produces alone: its prompt in one eval, then greedy
// decoding; the logits of every step, back to back.
std::vector<float> alone(const LlamaModel& model, const ForwardConfig& config, int threads,
                         const std::vector<int32_t>& prompt, int steps) {
    LocalDecoder decoder(model, config, threads);
    const int n_vocab = model.hparams().n_vocab;
    std::vector<float> out;
    const float* logits = decoder.eval(prompt, 0);
    for (int s = 0; s < steps; ++s) {
        out.insert(out.end(), logits, logits + n_vocab);
        const int32_t next[1] = {argmax(logits, n_vocab)};
        logits = decoder.eval(next, static_cast<int>(prompt.size()) + s);
    }
    return out;
}

// The same sequences batched: prompts join at different steps (a new
// request's prefill beside others' decoding), then all decode together.
void expect_batched_equals_alone(const std::string& path, int threads, int n_batch) {
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    ForwardConfig config;
    config.n_ctx = 96;
    config.n_batch = n_batch;
    const int n_seq = 4, steps = 12;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<float>> want;
    for (int s = 0; s < n_seq; ++s) {
        prompts.push_back(prompt_of(s, 5 + 9 * s, n_vocab));
        want.push_back(alone(model, config, threads, prompts.back(), steps));
    }
    config.n_seq = n_seq;
    LocalDecoder decoder(model, config, threads);
    ASSERT_EQ(decoder.n_seq(), n_seq);
    // Sequence s joins at step 2 * s; at each step every joined sequence
    // evaluates its prompt (the step it joins) or its last sampled token.
    std::vector<int> produced(n_seq, 0);
    std::vector<int32_t> last(n_seq, 0);
    for (int step = 0; step < 2 * n_seq + steps; ++step) {
        std::vector<SeqEval> evals;
        std::vector<int> who;
        for (int s = 0; s < n_seq; ++s) {
            if (step < 2 * s || produced[s] >= steps) continue;
            const int pos = static_cast<int>(prompts[s].size()) + produced[s] - 1;
            if (step == 2 * s) {
                evals.push_back({s, 0, prompts[s]});
            } else {
                evals.push_back({s, pos, std::span<const int32_t>(&last[s], 1)});
            }
            who.push_back(s);
        }
        if (evals.empty()) continue;
        const float* logits = decoder.eval_seqs(evals);
        for (size_t i = 0; i < who.size(); ++i) {
            const int s = who[i];
            const float* row = logits + i * n_vocab;
            ASSERT_EQ(0, std::memcmp(row, want[s].data() + static_cast<size_t>(produced[s]) * n_vocab,
                                     sizeof(float) * n_vocab))
                << path << ": sequence " << s << " step " << produced[s] << " differs from the sequence alone";
            last[s] = argmax(row, n_vocab);
            ++produced[s];
        }
    }
    for (int s = 0; s < n_seq; ++s) EXPECT_EQ(produced[s], steps);
}

}  // namespace

TEST(SequenceBatching, Stories260KSequencesInOneBatchEqualEachAlone) {
    expect_batched_equals_alone(test::stories260k(), 2, 512);
}

TEST(SequenceBatching, GeneratedModelsInEveryTypeEqualEachAlone) {
    const std::string dir = test::scratch_dir("sequence_batching");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K}) {
        RandomModelSpec spec;
        spec.n_embd = 512;
        spec.n_layer = 2;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 2816;
        spec.n_vocab = 300;
        spec.type = type;
        const std::string path = dir + "/gqa-" + quant_type_name(type) + ".gguf";
        write_random_model(spec, path);
        for (int threads : {1, 2}) expect_batched_equals_alone(path, threads, 512);
    }
}

TEST(SequenceBatching, BatchesRefuseABadSequenceOrPosition) {
    const LlamaModel model(test::stories260k());
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_seq = 2;
    LocalDecoder decoder(model, config, 1);
    const int32_t t[2] = {1, 2};
    const SeqEval twice[] = {{0, 0, t}, {0, 2, t}};
    EXPECT_THROW(decoder.eval_seqs(twice), Error);
    const SeqEval outside[] = {{2, 0, t}};
    EXPECT_THROW(decoder.eval_seqs(outside), Error);
    const SeqEval past_end[] = {{1, 15, t}};
    EXPECT_THROW(decoder.eval_seqs(past_end), Error);
}

}  // namespace tessera

namespace tessera {

// A short run (a speculative verification: the step's token and its draft)
// gives every position the bits of evaluating the tokens one at a time, so
// verified greedy output is plain greedy output.
TEST(SequenceBatching, AShortRunGivesTheBitsOfOneTokenAtATime) {
    const std::string dir = test::scratch_dir("sequence_batching");
    for (QuantType type : {QuantType::F32, QuantType::Q4_0}) {
        RandomModelSpec spec;
        spec.n_embd = 256;
        spec.n_layer = 2;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 512;
        spec.n_vocab = 300;
        spec.type = type;
        const std::string path = dir + "/short-" + quant_type_name(type) + ".gguf";
        write_random_model(spec, path);
        const LlamaModel model(path);
        const int n_vocab = model.hparams().n_vocab;
        ForwardConfig config;
        config.n_ctx = 96;
        const std::vector<int32_t> prompt = prompt_of(3, 40, n_vocab);
        const std::vector<int32_t> run = {5, 77, 12, 250, 9, 31, 2, 18};
        for (int threads : {1, 2}) {
            LocalDecoder together(model, config, threads), one(model, config, threads);
            together.eval(prompt, 0);
            one.eval(prompt, 0);
            const float* all = together.eval_all(run, static_cast<int>(prompt.size()));
            const std::vector<float> rows(all, all + run.size() * n_vocab);
            for (size_t t = 0; t < run.size(); ++t) {
                const float* logits = one.eval(std::span<const int32_t>(run).subspan(t, 1), static_cast<int>(prompt.size() + t));
                ASSERT_EQ(0, std::memcmp(logits, rows.data() + t * n_vocab, sizeof(float) * n_vocab))
                    << quant_type_name(type) << ", " << threads << " threads, position " << t;
            }
        }
    }
}

}  // namespace tessera
