// Perplexity and KL divergence (engine/perplexity.h, engine/kl_divergence.h):
// chunking as llama.cpp does it, the PPL against a computation written out
// here from token-by-token logits, decoder reuse across chunks, the compact
// base file, and KL of a model against itself and against its Q8_0.
#include "engine/kl_divergence.h"
#include "engine/perplexity.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/quantize_model.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/rng.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace tessera {

using test::error_of;

namespace {

std::string story_text() {
    std::ifstream in(test::source_dir() + "/tests/data/little_stories.txt", std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string stories260k() { return test::shared_models() + "/stories260K.gguf"; }

struct Loaded {
    explicit Loaded(const std::string& path, int n_ctx = 64, int n_batch = 512)
        : model(path), tokenizer(make_tokenizer(load_vocab(model.file()))) {
        ForwardConfig config;
        config.n_ctx = n_ctx;
        config.n_batch = n_batch;
        config.kv_type = QuantType::F32;
        decoder = std::make_unique<LocalDecoder>(model, config, 2);
    }
    LlamaModel model;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<LocalDecoder> decoder;
};

}  // namespace

TEST(Perplexity, ChunksAsLlamaCpp) {
    PerplexityParams params;
    params.n_ctx = 100;
    const ChunkPlan plan = plan_chunks(1050, params);
    EXPECT_EQ(plan.n_chunk, 10);  // the tail of 50 is dropped
    EXPECT_EQ(plan.first, 50);
    EXPECT_EQ(plan.n_scored(), 49);
    params.n_chunks = 3;
    EXPECT_EQ(plan_chunks(1050, params).n_chunk, 3);
    params.n_chunks = 30;
    EXPECT_EQ(plan_chunks(1050, params).n_chunk, 10);
    EXPECT_NE(error_of([&] { plan_chunks(99, params); }).find("one chunk needs 100"), std::string::npos);

    std::vector<int32_t> tokens(250);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i + 10);
    params.n_chunks = -1;
    const ChunkPlan p = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, p, 1);
    ASSERT_EQ(inputs.size(), 200u);
    EXPECT_EQ(inputs[0], 1);
    EXPECT_EQ(inputs[1], 11);
    EXPECT_EQ(inputs[100], 1);  // every chunk starts with BOS, like a document
    EXPECT_EQ(inputs[101], 111);
    EXPECT_EQ(chunk_inputs(tokens, p, -1)[100], 110);
}

TEST(Perplexity, NllStatsMatchLlamaCppFormulas) {
    NllStats s;
    for (double v : {1.0, 2.0, 3.0, 4.0}) s.add(v);
    EXPECT_DOUBLE_EQ(s.mean(), 2.5);
    EXPECT_DOUBLE_EQ(s.ppl(), std::exp(2.5));
    // llama.cpp: sqrt((E[x^2] - E[x]^2) / (n - 1)) * PPL
    EXPECT_NEAR(s.ppl_error(), std::sqrt((7.5 - 6.25) / 3.0) * std::exp(2.5), 1e-12);
    const float logits[3] = {1.0f, 2.0f, 3.0f};
    EXPECT_NEAR(log_sum_exp(logits, 3), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
}

// The PPL of two chunks equals one written out here from logits computed one
// token at a time on a fresh decoder per chunk.
TEST(Perplexity, MatchesATokenByTokenComputation) {
    REQUIRE_SHARED_MODELS();
    Loaded m(stories260k());
    const std::vector<int32_t> tokens = m.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    params.n_chunks = 2;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, m.tokenizer->vocab().bos_id);
    const PerplexityResult r = compute_perplexity(*m.decoder, inputs, plan);
    ASSERT_EQ(r.nll.count, 2u * 31u);
    ASSERT_EQ(r.chunk_ppl.size(), 2u);

    const int n_vocab = m.model.hparams().n_vocab;
    double sum = 0.0;
    for (int c = 0; c < 2; ++c) {
        Loaded fresh(stories260k());
        for (int pos = 0; pos < 63; ++pos) {
            const int32_t token = c == 0 || pos > 0 ? tokens[c * 64 + pos] : m.tokenizer->vocab().bos_id;
            const float* logits = fresh.decoder->eval(std::span<const int32_t>(&token, 1), pos);
            if (pos < 32) continue;
            double z = 0.0;
            for (int v = 0; v < n_vocab; ++v) z += std::exp(static_cast<double>(logits[v]));
            sum += std::log(z) - logits[tokens[c * 64 + pos + 1]];
        }
        if (c == 0) {
            EXPECT_NEAR(r.chunk_ppl[0], std::exp(sum / 31.0), 1e-4 * r.chunk_ppl[0]);
        }
    }
    const double expected = std::exp(sum / 62.0);
    EXPECT_TRUE(std::isfinite(r.nll.ppl()));
    EXPECT_GT(r.nll.ppl(), 1.0);
    EXPECT_NEAR(r.nll.ppl(), expected, 1e-4 * expected);
}

// Evaluating a chunk from position 0 on a decoder that ran other chunks gives
// the logits of a fresh decoder: no context leaks between chunks.
TEST(Perplexity, ReusedDecoderEqualsAFreshOne) {
    REQUIRE_SHARED_MODELS();
    Loaded reused(stories260k());
    Loaded fresh(stories260k());
    const std::vector<int32_t> tokens = reused.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, 1);
    const size_t n = static_cast<size_t>(64) * reused.model.hparams().n_vocab;
    eval_chunk(*reused.decoder, inputs, plan, 0);
    eval_chunk(*reused.decoder, inputs, plan, 1);
    const float* a = eval_chunk(*reused.decoder, inputs, plan, 2);
    const std::vector<float> from_reused(a, a + n);
    const float* b = eval_chunk(*fresh.decoder, inputs, plan, 2);
    EXPECT_EQ(from_reused, std::vector<float>(b, b + n));
}

// A chunk evaluated in several batches (-b smaller than -c) scores the same.
TEST(Perplexity, BatchSizeDoesNotChangeTheResult) {
    REQUIRE_SHARED_MODELS();
    Loaded whole(stories260k(), 64);
    Loaded batched(stories260k(), 64, 10);
    const std::vector<int32_t> tokens = whole.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    params.n_chunks = 3;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, 1);
    const double a = compute_perplexity(*whole.decoder, inputs, plan).nll.ppl();
    const double b = compute_perplexity(*batched.decoder, inputs, plan).nll.ppl();
    EXPECT_NEAR(a, b, 1e-4 * a);
}

TEST(KlBase, RowsRoundTripWithinAStep) {
    Rng rng(3);
    for (int n_vocab : {2, 7, 512, 3000}) {
        std::vector<float> logits(static_cast<size_t>(n_vocab));
        for (float& l : logits) l = 4.0f * rng.next_normal();
        std::vector<uint8_t> row(kl_row_bytes(n_vocab));
        encode_log_probs(logits.data(), n_vocab, n_vocab - 1, row.data());
        std::vector<float> lp(static_cast<size_t>(n_vocab));
        decode_log_probs(row.data(), n_vocab, lp.data());
        const double lse = log_sum_exp(logits.data(), n_vocab);
        for (int v = 0; v < n_vocab; ++v) {
            const double exact = logits[v] - lse;
            if (std::isinf(lp[v])) {
                EXPECT_LT(exact, -25.0 + 1e-3) << v;  // only far-improbable tokens are left out
            } else {
                EXPECT_NEAR(lp[v], exact, 2.5e-4) << n_vocab << " " << v;
            }
        }
    }
    // A distribution spanning more than the 25-nat range leaves the tail out.
    const float wide[4] = {0.0f, -5.0f, -40.0f, -60.0f};
    std::vector<uint8_t> row(kl_row_bytes(4));
    encode_log_probs(wide, 4, 0, row.data());
    float lp[4];
    decode_log_probs(row.data(), 4, lp);
    EXPECT_FALSE(std::isinf(lp[1]));
    EXPECT_TRUE(std::isinf(lp[2]));
    EXPECT_TRUE(std::isinf(lp[3]));
    // All-equal logits (a zero step) decode to the uniform distribution.
    const float flat[3] = {2.0f, 2.0f, 2.0f};
    encode_log_probs(flat, 3, 0, row.data());
    decode_log_probs(row.data(), 3, lp);
    for (int v = 0; v < 3; ++v) EXPECT_NEAR(lp[v], -std::log(3.0), 1e-6);
}

TEST(KlDivergence, OfAModelAgainstItselfIsZero) {
    REQUIRE_SHARED_MODELS();
    const std::string dir = test::scratch_dir("kl_self");
    Loaded m(stories260k());
    const std::vector<int32_t> tokens = m.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    params.n_chunks = 6;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, 1);
    const uint64_t fp = vocab_fingerprint(m.tokenizer->vocab());
    const PerplexityResult ppl = write_kl_base(*m.decoder, inputs, plan, fp, dir + "/base.kld");
    EXPECT_NEAR(ppl.nll.ppl(), compute_perplexity(*m.decoder, inputs, plan).nll.ppl(), 1e-12);

    const KlBaseFile base(dir + "/base.kld");
    EXPECT_EQ(base.header().plan.n_chunk, 6);
    EXPECT_EQ(base.header().plan.n_ctx, 64);
    EXPECT_EQ(base.header().vocab_fingerprint, fp);
    EXPECT_EQ(std::vector<int32_t>(base.inputs().begin(), base.inputs().end()), inputs);
    EXPECT_EQ(std::filesystem::file_size(dir + "/base.kld"), 40u + 4u * 6 * 64 + 6u * 31 * (16 + 2 * 512));

    const KlResult r = compute_kl_divergence(*m.decoder, base, -1);
    EXPECT_EQ(r.kld.count, 6u * 31u);
    EXPECT_LT(std::fabs(r.kld.mean()), 1e-6);
    EXPECT_LT(r.max_kld(), 1e-5);
    EXPECT_EQ(r.n_same_top, r.kld.count);
    EXPECT_DOUBLE_EQ(r.same_top(), 1.0);
    EXPECT_NEAR(r.nll.ppl(), ppl.nll.ppl(), 1e-5 * ppl.nll.ppl());
    EXPECT_NEAR(r.nll_base.ppl(), ppl.nll.ppl(), 1e-5 * ppl.nll.ppl());
    EXPECT_NEAR(r.ln_ratio.mean(), 0.0, 1e-6);
    EXPECT_EQ(compute_kl_divergence(*m.decoder, base, 2).kld.count, 2u * 31u);
}

TEST(KlDivergence, OfQ8_0FromF32IsSmallButNotZero) {
    REQUIRE_SHARED_MODELS();
    const std::string dir = test::scratch_dir("kl_q8");
    QuantizeParams qp;
    qp.target = *parse_quantize_target("Q8_0");
    quantize_model(stories260k(), dir + "/q8.gguf", qp);

    Loaded f32(stories260k(), 128);
    const std::vector<int32_t> tokens = f32.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 128;
    params.n_chunks = 4;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, 1);
    write_kl_base(*f32.decoder, inputs, plan, vocab_fingerprint(f32.tokenizer->vocab()), dir + "/base.kld");

    Loaded q8(dir + "/q8.gguf", 128);
    EXPECT_EQ(vocab_fingerprint(q8.tokenizer->vocab()), vocab_fingerprint(f32.tokenizer->vocab()));
    const KlResult r = compute_kl_divergence(*q8.decoder, KlBaseFile(dir + "/base.kld"), -1);
    EXPECT_GT(r.kld.mean(), 1e-5);
    EXPECT_LT(r.kld.mean(), 5e-3);
    EXPECT_GT(r.same_top(), 0.95);
    EXPECT_LT(std::fabs(r.ln_ratio.mean()), 0.01);
    EXPECT_GT(r.nll_correlation(), 0.99);
}

TEST(KlDivergence, RefusesBadOrMismatchedBaseFiles) {
    REQUIRE_SHARED_MODELS();
    const std::string dir = test::scratch_dir("kl_refuse");
    Loaded m(stories260k());
    const std::vector<int32_t> tokens = m.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    params.n_chunks = 1;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    write_kl_base(*m.decoder, chunk_inputs(tokens, plan, 1), plan, 42, dir + "/base.kld");

    // Truncated.
    std::filesystem::copy_file(dir + "/base.kld", dir + "/short.kld");
    std::filesystem::resize_file(dir + "/short.kld", std::filesystem::file_size(dir + "/base.kld") - 1);
    EXPECT_NE(error_of([&] { KlBaseFile f(dir + "/short.kld"); }).find("truncated or corrupt"), std::string::npos);
    // Not a base file at all.
    EXPECT_NE(error_of([&] { KlBaseFile f(stories260k()); }).find("not a KL-divergence base file"), std::string::npos);
    // A model of another vocabulary size.
    {
        std::ofstream out(dir + "/other.kld", std::ios::binary);
        std::ifstream in(dir + "/base.kld", std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), {});
        // Claim a vocabulary of 511 and shorten the file to match: a model of 512 is refused.
        const uint32_t n_vocab = 511;
        bytes.replace(12, 4, reinterpret_cast<const char*>(&n_vocab), 4);
        const size_t rows = 31, old_row = 16 + 2 * 512, new_row = 16 + 2 * 511;
        bytes.resize(bytes.size() - rows * (old_row - new_row));
        out << bytes;
    }
    const KlBaseFile other(dir + "/other.kld");
    EXPECT_NE(error_of([&] { compute_kl_divergence(*m.decoder, other, -1); }).find("vocabulary of 511"),
              std::string::npos);
    // Token ids outside the vocabulary are refused at open.
    {
        std::ifstream in(dir + "/base.kld", std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), {});
        const int32_t bad = 9999;
        bytes.replace(40 + 4 * 5, 4, reinterpret_cast<const char*>(&bad), 4);
        std::ofstream(dir + "/badtok.kld", std::ios::binary) << bytes;
    }
    EXPECT_NE(error_of([&] { KlBaseFile f(dir + "/badtok.kld"); }).find("outside the vocabulary"), std::string::npos);
}

TEST(KlDivergence, VocabularyFingerprintTellsVocabulariesApart) {
    Vocab a;
    a.tokens = {"a", "b", "c"};
    Vocab b = a;
    EXPECT_EQ(vocab_fingerprint(a), vocab_fingerprint(b));
    b.tokens = {"ab", "", "c"};
    EXPECT_NE(vocab_fingerprint(a), vocab_fingerprint(b));
}

}  // namespace tessera
