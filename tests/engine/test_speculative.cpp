// Speculative decoding (GenerationParams::drafter): greedy output equals
// plain greedy token for token with n-gram drafts, a good draft model (the
// bundled model quantized) and a bad one (random weights, same vocabulary:
// nearly every draft rejected); a draft with another vocabulary is refused;
// sampled output follows the target's distribution (chi-square). Drafting
// ahead (the next draft made during a traversal) changes no token, greedy or
// sampled, and starts every traversal on its guess when the draft is the
// model itself.
#include "engine/drafter.h"
#include "engine/generation.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/quantize_model.h"
#include "model/random_model.h"
#include "model/tokenizer.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace tessera {

namespace {

std::string stories() { return test::stories260k(); }

std::string quantized_stories() {
    const std::string path = test::scratch_dir("speculative") + "/stories260K-q8_0.gguf";
    QuantizeParams params;
    params.target = *parse_quantize_target("Q8_0");
    quantize_model(stories(), path, params);
    return path;
}

std::string random_same_vocab() {
    const std::string path = test::scratch_dir("speculative") + "/random-same-vocab.gguf";
    RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 4;
    spec.n_ff = 128;
    spec.vocab_from = stories();
    spec.seed = 7;
    write_random_model(spec, path);
    return path;
}

// The target's generations, each from position 0 of one decoder (a new one
// per generation copied the model's weights each time: most of this suite's
// time), as a chat session's turns reuse theirs.
class Target {
public:
    explicit Target(const std::string& path)
        : model(path), tokenizer_(make_tokenizer(load_vocab(model.file()))), decoder_(model, config(), 1) {}

    GenerationResult run(Drafter* drafter, const std::string& prompt, int n, float temp = 0.0f, uint64_t seed = 1,
                         int draft_max = 6, bool draft_ahead = false) {
        GenerationParams params;
        params.n_predict = n;
        params.stop_at_eos = false;
        params.sampler.temperature = temp;
        params.sampler.seed = seed;
        // The whole distribution (no truncation), so that many tokens occur.
        params.sampler.top_k = 0;
        params.sampler.top_p = 1.0f;
        params.sampler.min_p = 0.0f;
        params.drafter = drafter;
        params.draft_max = draft_max;
        params.draft_ahead = draft_ahead;
        return generate(decoder_, *tokenizer_, tokenizer_->encode(prompt, true), params);
    }

    const LlamaModel model;

private:
    static ForwardConfig config() {
        ForwardConfig c;
        c.n_ctx = 256;
        return c;
    }
    std::unique_ptr<Tokenizer> tokenizer_;
    LocalDecoder decoder_;
};

}  // namespace

TEST(Speculative, GreedyOutputEqualsPlainWithEveryDraft) {
    Target target(stories());
    const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
    const GenerationResult plain = target.run(nullptr, prompt, 120);
    ASSERT_EQ(plain.tokens.size(), 120u);
    NgramDrafter ngram;
    ModelDrafter good(quantized_stories(), target.model, 256, 1);
    ModelDrafter bad(random_same_vocab(), target.model, 256, 1);
    for (Drafter* d : std::initializer_list<Drafter*>{&ngram, &good, &bad}) {
        for (int draft_max : {1, 4, 12}) {
            const GenerationResult spec = target.run(d, prompt, 120, 0.0f, 1, draft_max);
            EXPECT_EQ(spec.tokens, plain.tokens) << d->name() << ", draft-max " << draft_max;
            EXPECT_EQ(spec.text, plain.text);
            EXPECT_GT(spec.drafted, 0) << d->name();
            EXPECT_LT(spec.traversals, 119 + 1) << d->name();
        }
    }
    // The good draft is accepted mostly and saves traversals; the bad one
    // is rejected mostly (rollback exercised at nearly every step).
    const GenerationResult with_good = target.run(&good, prompt, 120);
    const GenerationResult with_bad = target.run(&bad, prompt, 120);
    EXPECT_GT(with_good.accepted * 10, with_good.drafted * 7) << with_good.accepted << " of " << with_good.drafted;
    EXPECT_LT(with_good.traversals * 2, 119);
    EXPECT_LT(with_bad.accepted * 4, with_bad.drafted) << with_bad.accepted << " of " << with_bad.drafted;
}

TEST(Speculative, DraftingAheadChangesNoTokenAndStartsOnItsGuess) {
    Target target(stories());
    const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
    const GenerationResult plain = target.run(nullptr, prompt, 100);
    NgramDrafter ngram;
    ModelDrafter good(quantized_stories(), target.model, 256, 1);
    ModelDrafter bad(random_same_vocab(), target.model, 256, 1);
    ModelDrafter itself(stories(), target.model, 256, 1);
    for (Drafter* d : std::initializer_list<Drafter*>{&ngram, &good, &bad, &itself}) {
        for (int draft_max : {1, 4, 12}) {
            SCOPED_TRACE(d->name() + ", draft-max " + std::to_string(draft_max));
            const GenerationResult ahead = target.run(d, prompt, 100, 0.0f, 1, draft_max, true);
            EXPECT_EQ(ahead.tokens, plain.tokens);
            EXPECT_EQ(ahead.text, plain.text);
            // The same drafter gives the same drafts, whether made ahead or
            // not: the same verifications, so the same sampled tokens too.
            const GenerationResult sampled = target.run(d, prompt, 60, 0.9f, 11, draft_max);
            const GenerationResult sampled_ahead = target.run(d, prompt, 60, 0.9f, 11, draft_max, true);
            EXPECT_EQ(sampled_ahead.tokens, sampled.tokens);
            EXPECT_EQ(sampled_ahead.traversals, sampled.traversals);
            EXPECT_EQ(sampled_ahead.accepted, sampled.accepted);
            if (d == &itself) {
                // Every draft stands and every guess holds: each traversal
                // after the first starts on the draft made during the one
                // before (the last ones may be cut by the token budget).
                // (The token that meets the budget ends generation before it counts as accepted.)
                EXPECT_GE(ahead.accepted, ahead.drafted - 1);
                EXPECT_GE(ahead.drafts_ahead, ahead.traversals - 2) << ahead.traversals << " traversals";
                EXPECT_GT(ahead.draft_ahead_seconds, 0.0);
            }
            if (d == &bad) {
                EXPECT_LT(ahead.drafts_ahead * 4, ahead.traversals);
            }
            const GenerationResult not_ahead = target.run(d, prompt, 100, 0.0f, 1, draft_max);
            EXPECT_EQ(not_ahead.drafts_ahead, 0);
            EXPECT_EQ(not_ahead.draft_ahead_seconds, 0.0);
        }
    }
}

TEST(Speculative, ADraftWithAnotherVocabularyIsRefused) {
    Target target(stories());
    const std::string path = test::scratch_dir("speculative") + "/other-vocab.gguf";
    RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_layer = 1;
    spec.n_head = 4;
    spec.n_head_kv = 4;
    spec.n_ff = 128;
    spec.n_vocab = 300;
    write_random_model(spec, path);
    try {
        ModelDrafter d(path, target.model, 128, 1);
        FAIL() << "a draft with another vocabulary was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("another vocabulary"), std::string::npos) << e.what();
    }
}

// Sampled speculative output follows the target's distribution: over many
// seeds, the 2nd and 3rd generated tokens (the first to go through
// verification) have the same distributions as in plain sampling. Two-sample
// chi-square over the tokens seen at least 20 times in all, the rest pooled;
// the threshold is the 0.999 quantile, so a correct sampler fails 1 run in
// 1000 (and the seeds are fixed: this test is deterministic).
TEST(Speculative, SampledOutputFollowsTheTargetDistribution) {
    Target target(stories());
    // The good draft proposes what the target finds likely (the acceptance
    // rule matters most there); the bad one what it does not.
    ModelDrafter good(quantized_stories(), target.model, 256, 1);
    ModelDrafter bad(random_same_vocab(), target.model, 256, 1);
    // A prompt with many likely continuations.
    const std::string prompt = "Once upon a time, there was a little";
    const int n = 1500;
    for (Drafter* d : std::initializer_list<Drafter*>{&good, &bad}) {
        // Per position (the 2nd and 3rd tokens: both verified, the 3rd
        // also after a rejection or a bonus token), the token's counts.
        std::map<int32_t, int> plain_counts[2], spec_counts[2];
        for (int s = 0; s < n; ++s) {
            const GenerationResult a = target.run(nullptr, prompt, 3, 1.0f, 1000 + s);
            const GenerationResult b = target.run(d, prompt, 3, 1.0f, 50000 + s);
            for (int i = 0; i < 2; ++i) {
                ++plain_counts[i][a.tokens[static_cast<size_t>(i + 1)]];
                ++spec_counts[i][b.tokens[static_cast<size_t>(i + 1)]];
            }
        }
        for (int i = 0; i < 2; ++i) {
            std::map<int32_t, int> all = plain_counts[i];
            for (const auto& [k, c] : spec_counts[i]) all[k] += c;
            double chi2 = 0.0;
            int cells = 0, rest_a = 0, rest_b = 0;
            const auto add = [&](int a, int b) {
                const double e = (a + b) / 2.0;  // equal sample sizes
                chi2 += (a - e) * (a - e) / e + (b - e) * (b - e) / e;
                ++cells;
            };
            for (const auto& [k, c] : all) {
                const int a = plain_counts[i].count(k) ? plain_counts[i][k] : 0;
                const int b = spec_counts[i].count(k) ? spec_counts[i][k] : 0;
                if (c >= 20) {
                    add(a, b);
                } else {
                    rest_a += a;
                    rest_b += b;
                }
            }
            if (rest_a + rest_b > 0) add(rest_a, rest_b);
            const int dof = cells - 1;
            ASSERT_GE(dof, 5) << "too few distinct outcomes to test";
            // Wilson-Hilferty approximation of the chi-square 0.999 quantile.
            const double z = 3.090;
            const double quantile = dof * std::pow(1.0 - 2.0 / (9.0 * dof) + z * std::sqrt(2.0 / (9.0 * dof)), 3.0);
            EXPECT_LT(chi2, quantile) << d->name() << ", token " << i + 2 << ": chi-square " << chi2 << " over " << dof
                                      << " degrees of freedom";
        }
        EXPECT_GT(d->name().size(), 0u);
    }
}

}  // namespace tessera
