// Perplexity and KL divergence (eval/perplexity.h, eval/kl_divergence.h):
// chunking as llama.cpp does it, the PPL against a computation written out
// here from token-by-token logits, decoder reuse across chunks, the base file
// in llama.cpp's format (rows encoded as documented, a file built byte by byte
// read back, bad files refused), the KL statistics against values worked out
// here, and KL of a model against itself and against its Q8_0.
#include "eval/kl_divergence.h"
#include "eval/perplexity.h"
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

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>

namespace tessera {

using test::error_of;

namespace {

std::string story_text() {
    std::ifstream in(test::source_dir() + "/tests/data/little_stories.txt", std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string stories260k() { return test::stories260k(); }

struct Loaded {
    explicit Loaded(const std::string& path, int n_ctx = 64, int n_batch = 512)
        : model(path), tokenizer(make_tokenizer(load_vocab(model.file()))) {
        ForwardConfig config;
        config.n_ctx = n_ctx;
        config.n_batch = n_batch;
        config.kv_types = QuantType::F32;
        decoder = std::make_unique<LocalDecoder>(model, config, 2);
    }
    LlamaModel model;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<LocalDecoder> decoder;
};

// A decoder of a tiny vocabulary whose logits are given per chunk (eval_all
// call) and position; it records the tokens it is fed.
class ScriptedDecoder : public Decoder {
public:
    ScriptedDecoder(int n_vocab, int n_ctx, std::vector<std::vector<float>> chunk_logits)
        : n_ctx_(n_ctx), chunk_logits_(std::move(chunk_logits)) {
        hparams_.n_vocab = n_vocab;
    }
    const ModelHParams& hparams() const override { return hparams_; }
    int n_ctx() const override { return n_ctx_; }
    const float* eval(std::span<const int32_t>, int) override { return nullptr; }
    const float* eval_all(std::span<const int32_t> tokens, int pos) override {
        EXPECT_EQ(pos, 0);
        EXPECT_EQ(tokens.size(), static_cast<size_t>(n_ctx_));
        fed.insert(fed.end(), tokens.begin(), tokens.end());
        return chunk_logits_.at(calls_++ % chunk_logits_.size()).data();
    }
    std::vector<int32_t> fed;

private:
    ModelHParams hparams_;
    int n_ctx_;
    std::vector<std::vector<float>> chunk_logits_;
    size_t calls_ = 0;
};

template <typename T>
void append(std::string& bytes, T value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T read_at(const std::string& bytes, size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    return value;
}

// The bytes of a base file as kl_divergence.h documents them (and llama.cpp
// writes them): magic, n_ctx, n_vocab, n_chunk, tokens, then rows of
// {f32 scale, f32 min_log_prob, u16 codes, u16 0 for an odd n_vocab}.
struct HandRow {
    float scale;
    float min_log_prob;
    std::vector<uint16_t> codes;
};

std::string hand_file(int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, const std::vector<int32_t>& tokens,
                      const std::vector<HandRow>& rows) {
    std::string bytes = "_logits_";
    append(bytes, n_ctx);
    append(bytes, n_vocab);
    append(bytes, n_chunk);
    for (int32_t t : tokens) append(bytes, t);
    for (const HandRow& r : rows) {
        append(bytes, r.scale);
        append(bytes, r.min_log_prob);
        for (uint16_t c : r.codes) append(bytes, c);
        if (r.codes.size() % 2 != 0) append(bytes, uint16_t{0});
    }
    return bytes;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

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

TEST(KlBase, RowsAreEncodedAsDocumented) {
    EXPECT_EQ(kl_row_values(3), 8u);  // 4 + 3 codes + 1 of padding
    EXPECT_EQ(kl_row_values(512), 516u);
    EXPECT_EQ(kl_row_bytes(32000), 2u * 32004u);
    Rng rng(3);
    for (int n_vocab : {2, 7, 512, 3001}) {
        std::vector<float> logits(static_cast<size_t>(n_vocab));
        for (float& l : logits) l = 4.0f * rng.next_normal();
        std::vector<uint8_t> row(kl_row_bytes(n_vocab), 0xAB);
        encode_log_probs(logits.data(), n_vocab, row.data());
        const float max = *std::max_element(logits.begin(), logits.end());
        const float min_logit = std::max(*std::min_element(logits.begin(), logits.end()), max - 16.0f);
        const double lse = log_sum_exp(logits.data(), n_vocab);
        float scale, min_log_prob;
        std::memcpy(&scale, row.data(), 4);
        std::memcpy(&min_log_prob, row.data() + 4, 4);
        EXPECT_EQ(scale, (max - min_logit) / 65535.0f) << n_vocab;
        EXPECT_NEAR(min_log_prob, min_logit - lse, 1e-5) << n_vocab;
        std::vector<float> lp(static_cast<size_t>(n_vocab));
        decode_log_probs(row.data(), n_vocab, lp.data());
        for (int v = 0; v < n_vocab; ++v) {
            uint16_t code;
            std::memcpy(&code, row.data() + 8 + 2 * v, 2);
            const double exact_code = logits[v] > min_logit ? (logits[v] - min_logit) / scale : 0.0;
            EXPECT_NEAR(code, exact_code, 0.5 + 1e-2) << n_vocab << " " << v;
            EXPECT_FLOAT_EQ(lp[v], scale * code + min_log_prob);
            const double exact = logits[v] - lse;
            if (logits[v] > min_logit) {
                EXPECT_NEAR(lp[v], exact, 1.3e-4 + 2e-5) << n_vocab << " " << v;
            }
        }
        if (n_vocab % 2 != 0) {
            EXPECT_EQ(row[row.size() - 1] | row[row.size() - 2], 0) << "padding";
        }
    }
    // Logits 16 or more below the top one all get code 0, which decodes to
    // at most -16: out of the KL sum.
    const float wide[4] = {0.0f, -5.0f, -40.0f, -60.0f};
    std::vector<uint8_t> row(kl_row_bytes(4));
    encode_log_probs(wide, 4, row.data());
    float lp[4];
    decode_log_probs(row.data(), 4, lp);
    EXPECT_NEAR(lp[0], -log_sum_exp(wide, 4), 1e-4);
    EXPECT_NEAR(lp[1], -5.0 - log_sum_exp(wide, 4), 1.3e-4);
    EXPECT_EQ(lp[2], lp[3]);
    EXPECT_LE(lp[2], -16.0f);
    // All-equal logits: scale 0, every code 0, each the uniform log-probability.
    const float flat[3] = {2.0f, 2.0f, 2.0f};
    encode_log_probs(flat, 3, row.data());
    EXPECT_EQ(std::vector<uint8_t>(row.begin(), row.begin() + 4), std::vector<uint8_t>(4, 0));
    decode_log_probs(row.data(), 3, lp);
    for (int v = 0; v < 3; ++v) EXPECT_NEAR(lp[v], -std::log(3.0), 1e-6);
}

// n_ctx 4 scores position 2 only (first = 2), predicting token 3: two chunks,
// two rows.
constexpr int32_t kTinyBos = 1;
const std::vector<int32_t> kTinyTokens = {1, 2, 0, 2, /* chunk 2 */ 2, 0, 1, 1};

TEST(KlBase, WritesTheDocumentedBytes) {
    const std::string dir = test::scratch_dir("kl_write_bytes");
    std::vector<float> chunk0(4 * 3, 0.0f), chunk1(4 * 3, 0.0f);
    const float logits0[3] = {0.0f, 0.5f, -1.0f};
    const float logits1[3] = {3.0f, 3.0f, -30.0f};
    std::copy(logits0, logits0 + 3, chunk0.begin() + 6);
    std::copy(logits1, logits1 + 3, chunk1.begin() + 6);
    ScriptedDecoder d(3, 4, {chunk0, chunk1});
    PerplexityParams params;
    params.n_ctx = 4;
    const ChunkPlan plan = plan_chunks(kTinyTokens.size(), params);
    const PerplexityResult r = write_kl_base(d, kTinyTokens, plan, kTinyBos, dir + "/base.bin");
    ASSERT_EQ(r.nll.count, 2u);
    // Each chunk was fed with BOS first; the file keeps the text's token 2.
    EXPECT_EQ(d.fed, (std::vector<int32_t>{1, 2, 0, 2, 1, 0, 1, 1}));

    const std::string bytes = read_bytes(dir + "/base.bin");
    ASSERT_EQ(bytes.size(), 20u + 4 * 8 + 2 * 16);
    EXPECT_EQ(bytes.substr(0, 8), "_logits_");
    EXPECT_EQ(read_at<int32_t>(bytes, 8), 4);   // n_ctx
    EXPECT_EQ(read_at<int32_t>(bytes, 12), 3);  // n_vocab
    EXPECT_EQ(read_at<int32_t>(bytes, 16), 2);  // n_chunk
    for (size_t i = 0; i < kTinyTokens.size(); ++i) EXPECT_EQ(read_at<int32_t>(bytes, 20 + 4 * i), kTinyTokens[i]) << i;
    // Chunk 1: range 1.5 (under 16), so min_logit is the smallest logit.
    const size_t row0 = 52, row1 = 68;
    EXPECT_EQ(read_at<float>(bytes, row0), 1.5f / 65535.0f);
    const double lse0 = std::log(std::exp(0.0) + std::exp(0.5) + std::exp(-1.0));
    EXPECT_NEAR(read_at<float>(bytes, row0 + 4), -1.0 - lse0, 1e-6);
    EXPECT_EQ(read_at<uint16_t>(bytes, row0 + 8), 43690);  // 1.0 / 1.5 * 65535
    EXPECT_EQ(read_at<uint16_t>(bytes, row0 + 10), 65535);
    EXPECT_EQ(read_at<uint16_t>(bytes, row0 + 12), 0);
    EXPECT_EQ(read_at<uint16_t>(bytes, row0 + 14), 0);  // padding
    // Chunk 2: the range is cut to 16 below the top.
    EXPECT_EQ(read_at<float>(bytes, row1), 16.0f / 65535.0f);
    EXPECT_NEAR(read_at<float>(bytes, row1 + 4), -16.0 - std::log(2.0 + std::exp(-33.0)), 1e-6);
    EXPECT_EQ(read_at<uint16_t>(bytes, row1 + 8), 65535);
    EXPECT_EQ(read_at<uint16_t>(bytes, row1 + 10), 65535);
    EXPECT_EQ(read_at<uint16_t>(bytes, row1 + 12), 0);
}

// A file assembled here byte by byte is read as documented, and the KL
// statistics come out as worked out here from llama.cpp's definitions.
TEST(KlBase, ReadsAFileBuiltByteByByte) {
    const std::string dir = test::scratch_dir("kl_read_bytes");
    // Chunk 1: base log-probs {-1, -1, -2}: tokens 0 and 1 tie, so the base's
    // top is token 0 (the lowest id, as llama.cpp picks it).
    // Chunk 2: base log-probs {-20 (left out: <= -16), -2, -10}, top token 1.
    write_bytes(dir + "/base.bin", hand_file(4, 3, 2, kTinyTokens,
                                             {{0.001f, -2.0f, {1000, 1000, 0}}, {0.002f, -20.0f, {0, 9000, 5000}}}));
    const KlBaseFile base(dir + "/base.bin");
    EXPECT_EQ(base.header().n_vocab, 3);
    EXPECT_EQ(base.header().plan.n_ctx, 4);
    EXPECT_EQ(base.header().plan.first, 2);
    EXPECT_EQ(base.header().plan.n_chunk, 2);
    EXPECT_EQ(std::vector<int32_t>(base.tokens().begin(), base.tokens().end()), kTinyTokens);
    float lp[3];
    decode_log_probs(base.row(1, 0), 3, lp);
    EXPECT_FLOAT_EQ(lp[0], -20.0f);
    EXPECT_FLOAT_EQ(lp[1], -2.0f);
    EXPECT_FLOAT_EQ(lp[2], -10.0f);

    // The model: top token 1 at both positions (not the base's 0 in chunk 1).
    const std::vector<std::vector<float>> q = {{0.0f, 0.5f, -1.0f}, {-3.0f, 1.0f, 0.25f}};
    std::vector<float> chunk0(12, 0.0f), chunk1(12, 0.0f);
    std::copy(q[0].begin(), q[0].end(), chunk0.begin() + 6);
    std::copy(q[1].begin(), q[1].end(), chunk1.begin() + 6);
    ScriptedDecoder d(3, 4, {chunk0, chunk1});
    const KlResult r = compute_kl_divergence(d, base, kTinyBos, -1);
    EXPECT_EQ(d.fed, (std::vector<int32_t>{1, 2, 0, 2, 1, 0, 1, 1}));

    const std::vector<std::vector<double>> base_lp = {{-1.0, -1.0, -2.0}, {-20.0, -2.0, -10.0}};
    const int targets[2] = {2, 1};
    double kl_sum = 0.0, nll_sum = 0.0, nll_base_sum = 0.0, p_diff_sum = 0.0;
    std::vector<double> kls;
    for (int c = 0; c < 2; ++c) {
        const double lse = log_sum_exp(q[c].data(), 3);
        double kl = 0.0;
        for (int v = 0; v < 3; ++v) {
            if (base_lp[c][v] > -16.0) kl += std::exp(base_lp[c][v]) * (base_lp[c][v] - (q[c][v] - lse));
        }
        kls.push_back(kl);
        kl_sum += kl;
        const double nll = lse - q[c][targets[c]];
        nll_sum += nll;
        nll_base_sum += -base_lp[c][targets[c]];
        p_diff_sum += std::exp(-nll) - std::exp(base_lp[c][targets[c]]);
    }
    ASSERT_EQ(r.kld.count, 2u);
    EXPECT_NEAR(r.kld.mean(), kl_sum / 2, 1e-5);
    EXPECT_NEAR(r.max_kld(), std::max(kls[0], kls[1]), 1e-5);
    EXPECT_NEAR(r.kld_quantile(0.5), kl_sum / 2, 1e-5);  // the median of two: their mean
    EXPECT_NEAR(r.nll.mean(), nll_sum / 2, 1e-5);
    EXPECT_NEAR(r.nll_base.mean(), nll_base_sum / 2, 1e-5);  // from the codes of the targets
    EXPECT_NEAR(r.ln_ratio.mean(), (nll_sum - nll_base_sum) / 2, 1e-5);
    EXPECT_NEAR(r.p_diff.mean(), p_diff_sum / 2, 1e-5);
    EXPECT_EQ(r.n_same_top, 1u);  // chunk 2 only
    EXPECT_DOUBLE_EQ(r.same_top(), 0.5);
}

TEST(KlBase, RefusesBadFilesWithClearErrors) {
    const std::string dir = test::scratch_dir("kl_bad_files");
    const std::vector<HandRow> rows = {{0.001f, -2.0f, {1000, 1000, 0}}, {0.002f, -20.0f, {0, 9000, 5000}}};
    const std::string good = hand_file(4, 3, 2, kTinyTokens, rows);
    auto error_for = [&](const std::string& bytes) {
        write_bytes(dir + "/f.bin", bytes);
        return error_of([&] { KlBaseFile f(dir + "/f.bin"); });
    };
    EXPECT_EQ(error_for(good), test::kNoError);
    const char* not_base = "not a KL-divergence base file (no \"_logits_\" magic";
    EXPECT_NE(error_for("").find(not_base), std::string::npos);
    EXPECT_NE(error_for("_logi").find(not_base), std::string::npos);
    EXPECT_NE(error_for("TSKLBASE" + good.substr(8)).find(not_base), std::string::npos);  // our old format
    EXPECT_NE(error_for("_logits_").find("shorter than the 20-byte header"), std::string::npos);
    EXPECT_NE(error_for(good.substr(0, 30)).find("truncated or corrupt"), std::string::npos);
    EXPECT_NE(error_for(good.substr(0, good.size() - 1)).find("truncated or corrupt"), std::string::npos);
    EXPECT_NE(error_for(good + "xx").find("extra bytes at the end"), std::string::npos);
    // Non-positive or out-of-bounds sizes.
    const std::vector<std::tuple<int32_t, int32_t, int32_t>> bad_sizes = {
        {0, 3, 2}, {-4, 3, 2}, {3, 3, 2}, {4, 0, 2}, {4, -3, 2}, {4, 3, 0}, {4, 3, -1}, {(1 << 24) + 1, 3, 2},
        {4, (1 << 24) + 1, 2}, {INT_MIN, INT_MIN, INT_MIN}};
    for (const auto& [n_ctx, n_vocab, n_chunk] : bad_sizes) {
        std::string bytes = good;
        std::memcpy(bytes.data() + 8, &n_ctx, 4);
        std::memcpy(bytes.data() + 12, &n_vocab, 4);
        std::memcpy(bytes.data() + 16, &n_chunk, 4);
        EXPECT_NE(error_for(bytes).find("corrupt header"), std::string::npos) << n_ctx << " " << n_vocab << " " << n_chunk;
    }
    // Sizes whose product overflows 64 bits are refused, not wrapped.
    {
        std::string bytes = good;
        const int32_t n_ctx = 1 << 24, n_vocab = 1 << 24, n_chunk = INT_MAX;
        std::memcpy(bytes.data() + 8, &n_ctx, 4);
        std::memcpy(bytes.data() + 12, &n_vocab, 4);
        std::memcpy(bytes.data() + 16, &n_chunk, 4);
        EXPECT_NE(error_for(bytes).find("truncated or corrupt"), std::string::npos);
    }
    // Token ids outside the vocabulary.
    for (int32_t bad : {3, -1, INT_MAX}) {
        std::vector<int32_t> tokens = kTinyTokens;
        tokens[5] = bad;
        EXPECT_NE(error_for(hand_file(4, 3, 2, tokens, rows)).find("token " + std::to_string(bad) +
                                                                    " at position 5 is outside the vocabulary of 3"),
                  std::string::npos);
    }
    // A model of another vocabulary size; a row whose scale is not a number.
    write_bytes(dir + "/f.bin", good);
    {
        const KlBaseFile base(dir + "/f.bin");
        ScriptedDecoder four(4, 4, {std::vector<float>(16, 0.0f)});
        EXPECT_NE(error_of([&] { compute_kl_divergence(four, base, kTinyBos, -1); })
                      .find("written with a vocabulary of 3 tokens, but this model has 4"),
                  std::string::npos);
    }
    std::vector<HandRow> nan_rows = rows;
    nan_rows[1].scale = std::nanf("");
    write_bytes(dir + "/nan.bin", hand_file(4, 3, 2, kTinyTokens, nan_rows));
    const KlBaseFile nan_base(dir + "/nan.bin");
    ScriptedDecoder d(3, 4, {std::vector<float>(12, 0.0f)});
    EXPECT_NE(error_of([&] { compute_kl_divergence(d, nan_base, kTinyBos, -1); }).find("corrupt row for position 2 of chunk 2"),
              std::string::npos);
}

TEST(KlDivergence, OfAModelAgainstItselfIsZero) {
    const std::string dir = test::scratch_dir("kl_self");
    Loaded m(stories260k());
    const std::vector<int32_t> tokens = m.tokenizer->encode(story_text(), true);
    PerplexityParams params;
    params.n_ctx = 64;
    params.n_chunks = 6;
    const ChunkPlan plan = plan_chunks(tokens.size(), params);
    const int32_t bos = m.tokenizer->vocab().bos_id;
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, bos);
    const PerplexityResult ppl = write_kl_base(*m.decoder, tokens, plan, bos, dir + "/base.kld");
    EXPECT_NEAR(ppl.nll.ppl(), compute_perplexity(*m.decoder, inputs, plan).nll.ppl(), 1e-12);

    const KlBaseFile base(dir + "/base.kld");
    EXPECT_EQ(base.header().plan.n_chunk, 6);
    EXPECT_EQ(base.header().plan.n_ctx, 64);
    EXPECT_EQ(base.header().n_vocab, 512);
    // The text's tokens as they are: chunk 2 starts with its own token, not BOS.
    EXPECT_EQ(std::vector<int32_t>(base.tokens().begin(), base.tokens().end()),
              std::vector<int32_t>(tokens.begin(), tokens.begin() + 6 * 64));
    ASSERT_NE(tokens[64], bos);
    EXPECT_EQ(std::filesystem::file_size(dir + "/base.kld"), 20u + 4u * 6 * 64 + 6u * 31 * 2 * (512 + 4));

    const KlResult r = compute_kl_divergence(*m.decoder, base, bos, -1);
    EXPECT_EQ(r.kld.count, 6u * 31u);
    // Not exactly 0: the base is rounded to 16 bits (and unclamped, as in llama.cpp).
    EXPECT_LT(std::fabs(r.kld.mean()), 2e-5);
    EXPECT_LT(r.max_kld(), 1e-4);
    EXPECT_GT(r.min_kld(), -1e-4);
    EXPECT_EQ(r.n_same_top, r.kld.count);
    EXPECT_DOUBLE_EQ(r.same_top(), 1.0);
    EXPECT_NEAR(r.nll.ppl(), ppl.nll.ppl(), 1e-5 * ppl.nll.ppl());
    EXPECT_NEAR(r.nll_base.ppl(), ppl.nll.ppl(), 2e-4 * ppl.nll.ppl());
    EXPECT_NEAR(r.ln_ratio.mean(), 0.0, 1e-4);
    EXPECT_LT(r.p_diff_rms(), 1e-4);
    EXPECT_GT(r.nll_correlation(), 0.9999);
    EXPECT_EQ(compute_kl_divergence(*m.decoder, base, bos, 2).kld.count, 2u * 31u);
    // Evaluated without BOS in place of each chunk's first token, chunks 2..6
    // see other inputs: the distributions move.
    EXPECT_GT(compute_kl_divergence(*m.decoder, base, -1, -1).kld.mean(), 1e-4);
}

TEST(KlDivergence, OfQ8_0FromF32IsSmallButNotZero) {
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
    write_kl_base(*f32.decoder, tokens, plan, 1, dir + "/base.kld");

    Loaded q8(dir + "/q8.gguf", 128);
    const KlResult r = compute_kl_divergence(*q8.decoder, KlBaseFile(dir + "/base.kld"), 1, -1);
    EXPECT_GT(r.kld.mean(), 1e-5);
    EXPECT_LT(r.kld.mean(), 5e-3);
    EXPECT_GT(r.same_top(), 0.95);
    EXPECT_LT(std::fabs(r.ln_ratio.mean()), 0.01);
    EXPECT_GT(r.nll_correlation(), 0.99);
    EXPECT_GT(r.p_diff_rms(), 0.0);
    EXPECT_LT(r.p_diff_rms(), 0.05);
}

TEST(KlDivergence, StatisticsAsLlamaCpp) {
    KlResult r;
    r.kld_values = {0.4f, 0.1f, 0.3f, 0.2f};
    EXPECT_NEAR(r.kld_quantile(0.5), 0.25, 1e-7);  // llama.cpp's median of an even count
    EXPECT_NEAR(r.kld_quantile(0.9), 0.37, 1e-7);  // interpolated: 0.3 + 0.7 * 0.1
    EXPECT_NEAR(r.kld_quantile(0.0), 0.1, 1e-7);
    EXPECT_NEAR(r.kld_quantile(1.0), 0.4, 1e-7);
    r.kld_values.push_back(0.5f);
    EXPECT_NEAR(r.kld_quantile(0.5), 0.3, 1e-7);
}

}  // namespace tessera
