#include "eval/kl_divergence.h"

#include "util/checked.h"
#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t kHeaderBytes = 20;
constexpr uint64_t kRowHeaderBytes = 8;
// llama.cpp keeps 16 nats below the top logit; base log-probabilities at or
// below -16 are left out of the KL sum.
constexpr float kLogitRange = 16.0f;
constexpr float kLeftOut = -16.0f;
constexpr float kMaxCode = 65535.0f;
// Sanity bounds on a header read from disk (llama.cpp's vocabularies are a few
// hundred thousand tokens, its contexts at most a few million).
constexpr int32_t kMaxVocab = 1 << 24;
constexpr int32_t kMaxKlContext = 1 << 24;

template <typename T>
void put(uint8_t* p, T value) {
    std::memcpy(p, &value, sizeof value);
}

template <typename T>
T get(const uint8_t* p) {
    T value;
    std::memcpy(&value, p, sizeof value);
    return value;
}

// llama.cpp's interpolated percentile of sorted values.
double percentile(const std::vector<float>& sorted, double fraction) {
    if (sorted.empty()) return 0.0;
    if (fraction <= 0.0) return sorted.front();
    if (fraction >= 1.0) return sorted.back();
    const double at = fraction * static_cast<double>(sorted.size() - 1);
    const size_t i = static_cast<size_t>(at);
    const double t = at - static_cast<double>(i);
    return (1.0 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)];
}

double quantile(std::vector<float> values, double fraction) {
    std::sort(values.begin(), values.end());
    return percentile(values, fraction);
}

}  // namespace

uint64_t kl_row_values(int64_t n_vocab) { return 2 * ((static_cast<uint64_t>(n_vocab) + 1) / 2) + 4; }

uint64_t kl_row_bytes(int64_t n_vocab) { return 2 * kl_row_values(n_vocab); }

void encode_log_probs(const float* logits, int64_t n_vocab, uint8_t* row) {
    // Float throughout, in llama.cpp's order, so equal logits give equal rows.
    float max_logit = logits[0];
    float min_logit = logits[0];
    for (int64_t i = 1; i < n_vocab; ++i) {
        max_logit = std::max(max_logit, logits[i]);
        min_logit = std::min(min_logit, logits[i]);
    }
    min_logit = std::max(min_logit, max_logit - kLogitRange);
    double sum_exp = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
    const float log_sum_exp = static_cast<float>(std::log(sum_exp));
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / kMaxCode;
    put<float>(row, scale);
    put<float>(row + 4, min_log_prob);
    uint8_t* codes = row + kRowHeaderBytes;
    const float inv_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int64_t i = 0; i < n_vocab; ++i) {
        uint16_t code = 0;
        if (scale != 0.0f && logits[i] > min_logit) {
            // Round half to even, as llama.cpp's nearest_int; the top logit
            // lands on 65535 up to float rounding.
            code = static_cast<uint16_t>(std::min(std::nearbyint(inv_scale * (logits[i] - min_logit)), kMaxCode));
        }
        put<uint16_t>(codes + 2 * i, code);
    }
    if (n_vocab % 2 != 0) put<uint16_t>(codes + 2 * n_vocab, 0);
}

void decode_log_probs(const uint8_t* row, int64_t n_vocab, float* log_probs) {
    const float scale = get<float>(row);
    const float min_log_prob = get<float>(row + 4);
    const uint8_t* codes = row + kRowHeaderBytes;
    for (int64_t i = 0; i < n_vocab; ++i) log_probs[i] = scale * get<uint16_t>(codes + 2 * i) + min_log_prob;
}

KlBaseWriter::KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> tokens)
    : path_(path), header_(header) {
    const ChunkPlan& plan = header.plan;
    if (plan.first != plan.n_ctx / 2) throw make_error("internal: llama.cpp's base files score from n_ctx / 2");
    if (tokens.size() != static_cast<size_t>(plan.n_chunk) * static_cast<size_t>(plan.n_ctx)) {
        throw make_error("internal: {} tokens for {} chunks of {}", tokens.size(), plan.n_chunk, plan.n_ctx);
    }
    rows_.resize(static_cast<size_t>(plan.n_scored()) * kl_row_bytes(header.n_vocab));
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) throw make_error("{}: cannot create: {}", path, std::strerror(errno));
    uint8_t head[kHeaderBytes] = {};
    std::memcpy(head, kMagic, sizeof kMagic);
    put<int32_t>(head + 8, plan.n_ctx);
    put<int32_t>(head + 12, header.n_vocab);
    put<int32_t>(head + 16, plan.n_chunk);
    if (std::fwrite(head, 1, sizeof head, file_) != sizeof head ||
        std::fwrite(tokens.data(), sizeof(int32_t), tokens.size(), file_) != tokens.size()) {
        throw make_error("{}: write failed: {}", path_, std::strerror(errno));
    }
}

KlBaseWriter::~KlBaseWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void KlBaseWriter::write_chunk(const float* logits) {
    const ChunkPlan& plan = header_.plan;
    if (chunks_written_ >= plan.n_chunk) throw make_error("internal: more chunks than the {} planned", plan.n_chunk);
    const uint64_t row_bytes = kl_row_bytes(header_.n_vocab);
    for (int i = plan.first; i < plan.n_ctx - 1; ++i) {
        encode_log_probs(logits + static_cast<int64_t>(i) * header_.n_vocab, header_.n_vocab,
                         rows_.data() + static_cast<uint64_t>(i - plan.first) * row_bytes);
    }
    if (std::fwrite(rows_.data(), 1, rows_.size(), file_) != rows_.size()) {
        throw make_error("{}: write failed: {}", path_, std::strerror(errno));
    }
    ++chunks_written_;
}

void KlBaseWriter::finish() {
    if (chunks_written_ != header_.plan.n_chunk) {
        throw make_error("internal: {} of {} chunks written to {}", chunks_written_, header_.plan.n_chunk, path_);
    }
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) throw make_error("{}: write failed: {}", path_, std::strerror(errno));
}

KlBaseFile::KlBaseFile(const std::string& path) : file_(path) {
    const uint8_t* p = file_.data();
    const uint64_t size = file_.size();
    if (size < sizeof kMagic || std::memcmp(p, kMagic, sizeof kMagic) != 0) {
        throw make_error("{}: not a KL-divergence base file (no \"_logits_\" magic; write one with tessera perplexity "
                         "or llama-perplexity --kl-divergence-base)",
                         path);
    }
    if (size < kHeaderBytes) throw make_error("{}: {} bytes, shorter than the 20-byte header: truncated", path, size);
    const int32_t n_ctx = get<int32_t>(p + 8);
    header_.n_vocab = get<int32_t>(p + 12);
    const int32_t n_chunk = get<int32_t>(p + 16);
    if (n_ctx < 4 || n_ctx > kMaxKlContext || header_.n_vocab <= 0 || header_.n_vocab > kMaxVocab || n_chunk <= 0) {
        throw make_error("{}: corrupt header (n_ctx {}, n_vocab {}, n_chunk {}; expected n_ctx in [4, {}], n_vocab in "
                         "[1, {}], n_chunk >= 1)",
                         path, n_ctx, header_.n_vocab, n_chunk, kMaxKlContext, kMaxVocab);
    }
    header_.plan.n_ctx = n_ctx;
    header_.plan.first = n_ctx / 2;
    header_.plan.n_chunk = n_chunk;
    const ChunkPlan& plan = header_.plan;
    // Both products fit in 64 bits (each factor is below 2^31, a row below
    // 2^26 bytes); their sum with the header is compared to the size without
    // forming a total that could overflow.
    const uint64_t n_tokens = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(n_ctx);
    const uint64_t n_rows = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(plan.n_scored());
    const uint64_t row_bytes = kl_row_bytes(header_.n_vocab);
    rows_offset_ = kHeaderBytes + 4 * n_tokens;
    const uint64_t max_rows = size >= rows_offset_ ? (size - rows_offset_) / row_bytes : 0;
    const bool fits = size >= rows_offset_ && n_rows <= max_rows;
    if (!fits || size != rows_offset_ + n_rows * row_bytes) {
        const std::string needs =
            n_rows <= (std::numeric_limits<uint64_t>::max() - rows_offset_) / row_bytes
                ? std::to_string(rows_offset_ + n_rows * row_bytes)
                : std::string("more than 2^64");
        throw make_error("{}: {} bytes, but its header ({} chunks of {} tokens, {} vocabulary entries) needs {}: {}",
                         path, size, n_chunk, n_ctx, header_.n_vocab, needs,
                         fits ? "extra bytes at the end, corrupt" : "truncated or corrupt");
    }
    tokens_.resize(n_tokens);
    std::memcpy(tokens_.data(), p + kHeaderBytes, n_tokens * 4);
    for (size_t i = 0; i < tokens_.size(); ++i) {
        if (tokens_[i] < 0 || tokens_[i] >= header_.n_vocab) {
            throw make_error("{}: token {} at position {} is outside the vocabulary of {}", path, tokens_[i], i,
                             header_.n_vocab);
        }
    }
}

const uint8_t* KlBaseFile::row(int c, int i) const {
    const uint64_t index = static_cast<uint64_t>(c) * static_cast<uint64_t>(header_.plan.n_scored()) + static_cast<uint64_t>(i);
    return file_.data() + rows_offset_ + index * kl_row_bytes(header_.n_vocab);
}

double KlResult::same_top() const { return kld.count ? static_cast<double>(n_same_top) / static_cast<double>(kld.count) : 0.0; }

double KlResult::same_top_error() const {
    if (kld.count < 2) return 0.0;
    const double p = same_top();
    return std::sqrt(p * (1.0 - p) / static_cast<double>(kld.count - 1));
}

double KlResult::p_diff_rms() const { return std::sqrt(p_diff2.mean()); }

double KlResult::p_diff_rms_error() const {
    const double rms = p_diff_rms();
    return rms > 0.0 ? 0.5 / rms * p_diff2.mean_error() : 0.0;
}

double KlResult::ppl_diff_error() const {
    if (nll.count < 2) return 0.0;
    const double n = static_cast<double>(nll.count);
    // Covariance of the two mean nll, as llama.cpp's covariance().
    const double cov = (sum_nll_product / n - nll.mean() * nll_base.mean()) / (n - 1.0);
    const double a = nll.ppl_error();
    const double b = nll_base.ppl_error();
    const double var = a * a + b * b - 2.0 * nll.ppl() * nll_base.ppl() * cov;
    return var > 0.0 ? std::sqrt(var) : 0.0;
}

double KlResult::max_kld() const {
    return kld_values.empty() ? 0.0 : *std::max_element(kld_values.begin(), kld_values.end());
}

double KlResult::min_kld() const {
    return kld_values.empty() ? 0.0 : *std::min_element(kld_values.begin(), kld_values.end());
}

double KlResult::kld_quantile(double p) const { return quantile(kld_values, p); }

double KlResult::p_diff_quantile(double p) const { return quantile(p_diff_values, p); }

double KlResult::nll_correlation() const {
    const double n = static_cast<double>(nll.count);
    if (nll.count < 2) return 0.0;
    const double cov = sum_nll_product / n - nll.mean() * nll_base.mean();
    const double var_a = nll.sum2 / n - nll.mean() * nll.mean();
    const double var_b = nll_base.sum2 / n - nll_base.mean() * nll_base.mean();
    return var_a > 0.0 && var_b > 0.0 ? cov / std::sqrt(var_a * var_b) : 0.0;
}

namespace {

// One scored position, as llama.cpp's log_softmax(n_vocab, logits, base_log_prob, tok, kld):
// float arithmetic in its order, so both programs print the same statistics
// for the same logits.
void compare_position(const float* logits, int64_t n_vocab, const uint8_t* row, int32_t target, KlResult& r,
                      const std::string& path, int chunk, int position) {
    float max_logit = logits[0];
    int64_t top = 0;
    for (int64_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > max_logit) {  // ties: the lowest id
            max_logit = logits[i];
            top = i;
        }
    }
    double sum_exp = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
    const float log_sum_exp = static_cast<float>(std::log(sum_exp));

    const float scale = get<float>(row);
    const float min_log_prob = get<float>(row + 4);
    if (!std::isfinite(scale) || scale < 0.0f || !std::isfinite(min_log_prob)) {
        throw make_error("{}: corrupt row for position {} of chunk {} (scale {}, min_log_prob {})", path, position,
                         chunk + 1, scale, min_log_prob);
    }
    const uint8_t* codes = row + kRowHeaderBytes;
    auto base_log_prob = [&](int64_t i) { return scale * get<uint16_t>(codes + 2 * i) + min_log_prob; };

    const float nll = max_logit + log_sum_exp - logits[target];
    const float nll_base = -base_log_prob(target);
    const float log_norm = max_logit + log_sum_exp;
    double kl = 0.0;
    int64_t top_base = 0;
    float top_base_log_prob = 0.0f;
    for (int64_t i = 0; i < n_vocab; ++i) {
        const float p_log_base = base_log_prob(i);
        // Ties (equal codes, common after 16-bit rounding): the lowest id.
        if (i == 0 || p_log_base > top_base_log_prob) {
            top_base_log_prob = p_log_base;
            top_base = i;
        }
        if (p_log_base > kLeftOut) kl += std::exp(p_log_base) * (p_log_base - logits[i] + log_norm);
    }
    // Not clamped at 0: the decoded base probabilities sum to one only up to
    // rounding, so a model against itself gives values around 0 of either
    // sign, as in llama.cpp.
    r.nll.add(nll);
    r.nll_base.add(nll_base);
    r.ln_ratio.add(static_cast<double>(nll) - nll_base);
    r.sum_nll_product += static_cast<double>(nll) * nll_base;
    r.kld.add(kl);
    r.kld_values.push_back(static_cast<float>(kl));
    if (top == top_base) ++r.n_same_top;
    const float p_diff = std::exp(-nll) - std::exp(-nll_base);
    r.p_diff.add(p_diff);
    r.p_diff2.add(static_cast<double>(p_diff) * p_diff);
    r.p_diff_values.push_back(p_diff);
}

}  // namespace

KlResult compute_kl_divergence(Decoder& decoder, const KlBaseFile& base, int32_t bos, int n_chunks,
                               const std::function<void(const KlChunkReport&)>& on_chunk) {
    const KlBaseHeader& header = base.header();
    const int64_t n_vocab = decoder.hparams().n_vocab;
    if (n_vocab != header.n_vocab) {
        throw make_error("{}: written with a vocabulary of {} tokens, but this model has {}", base.path(),
                         header.n_vocab, n_vocab);
    }
    KlResult r;
    r.plan = header.plan;
    if (n_chunks >= 0) r.plan.n_chunk = std::min(r.plan.n_chunk, n_chunks);
    if (r.plan.n_chunk == 0) throw make_error("--chunks 0 leaves nothing to evaluate");
    const std::span<const int32_t> tokens = base.tokens();
    const std::vector<int32_t> inputs = chunk_inputs(tokens, r.plan, bos);
    const size_t n_values = static_cast<size_t>(r.plan.n_chunk) * static_cast<size_t>(r.plan.n_scored());
    r.kld_values.reserve(n_values);
    r.p_diff_values.reserve(n_values);
    for (int c = 0; c < r.plan.n_chunk; ++c) {
        const double t0 = now_seconds();
        const float* logits = eval_chunk(decoder, inputs, r.plan, c);
        const double seconds = now_seconds() - t0;
        // Targets come from the stored tokens: position first + 1 and later,
        // never the substituted BOS.
        const std::span<const int32_t> chunk = tokens.subspan(static_cast<size_t>(c) * r.plan.n_ctx, r.plan.n_ctx);
        for (int i = r.plan.first; i < r.plan.n_ctx - 1; ++i) {
            compare_position(logits + static_cast<int64_t>(i) * n_vocab, n_vocab, base.row(c, i - r.plan.first),
                             chunk[static_cast<size_t>(i) + 1], r, base.path(), c, i);
        }
        if (on_chunk) {
            on_chunk({c, r.plan.n_chunk, r.nll.ppl(), r.nll.ppl_error(), r.ln_ratio.mean(), r.ln_ratio.mean_error(),
                      r.kld.mean(), r.kld.mean_error(), r.p_diff_rms(), r.p_diff_rms_error(), r.same_top(),
                      r.same_top_error(), seconds});
        }
    }
    return r;
}

PerplexityResult write_kl_base(Decoder& decoder, std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t bos,
                               const std::string& path, const std::function<void(const ChunkReport&)>& on_chunk) {
    KlBaseHeader header;
    header.n_vocab = decoder.hparams().n_vocab;
    header.plan = plan;
    const std::vector<int32_t> inputs = chunk_inputs(tokens, plan, bos);
    KlBaseWriter writer(path, header, tokens.first(inputs.size()));
    PerplexityResult result = compute_perplexity(decoder, inputs, plan, on_chunk,
                                                 [&](int, std::span<const int32_t>, const float* logits) {
                                                     writer.write_chunk(logits);
                                                 });
    writer.finish();
    return result;
}

}  // namespace tessera
