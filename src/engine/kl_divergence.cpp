#include "engine/kl_divergence.h"

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

constexpr char kMagic[8] = {'T', 'S', 'K', 'L', 'B', 'A', 'S', 'E'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHeaderBytes = 40;
constexpr uint64_t kRowHeaderBytes = 16;
// Log-probabilities more than this below the top one are not stored: they
// weigh less than e^-25 (1.4e-11) each in the KL sum.
constexpr double kLogProbRange = 25.0;
constexpr double kMaxCode = 65535.0;

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

}  // namespace

uint64_t vocab_fingerprint(const Vocab& vocab) {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint8_t byte) {
        h ^= byte;
        h *= 0x100000001b3ull;
    };
    for (const std::string& token : vocab.tokens) {
        for (char c : token) mix(static_cast<uint8_t>(c));
        mix(0);
    }
    return h;
}

uint64_t kl_row_bytes(int64_t n_vocab) {
    return checked_add(kRowHeaderBytes, checked_mul(2, static_cast<uint64_t>(n_vocab), "KL row"), "KL row");
}

void encode_log_probs(const float* logits, int64_t n_vocab, int32_t target, uint8_t* row) {
    const double lse = log_sum_exp(logits, n_vocab);
    int32_t top = 0;
    float min = logits[0];
    for (int64_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[top]) top = static_cast<int32_t>(i);
        min = std::min(min, logits[i]);
    }
    const double max_lp = logits[top] - lse;
    const double lo = std::max(static_cast<double>(min) - lse, max_lp - kLogProbRange);
    const double step = (max_lp - lo) / (kMaxCode - 1.0);
    put<float>(row, static_cast<float>(lo));
    put<float>(row + 4, static_cast<float>(step));
    put<int32_t>(row + 8, top);
    put<float>(row + 12, static_cast<float>(logits[target] - lse));
    // Codes are computed against the stored (float) lo and step, so decoding
    // gives back the nearest representable value.
    const double lo_f = static_cast<float>(lo);
    const double step_f = static_cast<float>(step);
    uint8_t* codes = row + kRowHeaderBytes;
    for (int64_t i = 0; i < n_vocab; ++i) {
        const double lp = logits[i] - lse;
        uint16_t code = 0;
        if (lp >= lo) {
            const double c = step_f > 0.0 ? 1.0 + std::nearbyint((lp - lo_f) / step_f) : 1.0;
            code = static_cast<uint16_t>(std::clamp(c, 1.0, kMaxCode));
        }
        put<uint16_t>(codes + 2 * i, code);
    }
}

void decode_log_probs(const uint8_t* row, int64_t n_vocab, float* log_probs) {
    const float lo = get<float>(row);
    const float step = get<float>(row + 4);
    const uint8_t* codes = row + kRowHeaderBytes;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n_vocab; ++i) {
        const uint16_t code = get<uint16_t>(codes + 2 * i);
        log_probs[i] = code == 0 ? -std::numeric_limits<float>::infinity()
                                 : lo + static_cast<float>(code - 1) * step;
        max = std::max(max, static_cast<double>(log_probs[i]));
    }
    // Rounding leaves the kept probabilities summing to about, not exactly,
    // one; renormalizing keeps KL(base || base) at zero up to rounding.
    double sum = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(log_probs[i]) - max);
    const float shift = static_cast<float>(max + std::log(sum));
    for (int64_t i = 0; i < n_vocab; ++i) log_probs[i] -= shift;
}

KlBaseWriter::KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> inputs)
    : path_(path), header_(header), row_(kl_row_bytes(header.n_vocab)) {
    const ChunkPlan& plan = header.plan;
    if (inputs.size() != static_cast<size_t>(plan.n_chunk) * static_cast<size_t>(plan.n_ctx)) {
        throw make_error("internal: {} inputs for {} chunks of {}", inputs.size(), plan.n_chunk, plan.n_ctx);
    }
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) throw make_error("{}: cannot create: {}", path, std::strerror(errno));
    uint8_t head[kHeaderBytes] = {};
    std::memcpy(head, kMagic, sizeof kMagic);
    put<uint32_t>(head + 8, kVersion);
    put<uint32_t>(head + 12, header.n_vocab);
    put<uint32_t>(head + 16, static_cast<uint32_t>(plan.n_ctx));
    put<uint32_t>(head + 20, static_cast<uint32_t>(plan.first));
    put<uint32_t>(head + 24, static_cast<uint32_t>(plan.n_chunk));
    put<uint32_t>(head + 28, 0);
    put<uint64_t>(head + 32, header.vocab_fingerprint);
    if (std::fwrite(head, 1, sizeof head, file_) != sizeof head ||
        std::fwrite(inputs.data(), sizeof(int32_t), inputs.size(), file_) != inputs.size()) {
        throw make_error("{}: write failed: {}", path_, std::strerror(errno));
    }
}

KlBaseWriter::~KlBaseWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void KlBaseWriter::write_chunk(std::span<const int32_t> chunk_inputs, const float* logits) {
    const ChunkPlan& plan = header_.plan;
    if (chunks_written_ >= plan.n_chunk) throw make_error("internal: more chunks than the {} planned", plan.n_chunk);
    for (int i = plan.first; i < plan.n_ctx - 1; ++i) {
        encode_log_probs(logits + static_cast<int64_t>(i) * header_.n_vocab, header_.n_vocab,
                         chunk_inputs[static_cast<size_t>(i) + 1], row_.data());
        if (std::fwrite(row_.data(), 1, row_.size(), file_) != row_.size()) {
            throw make_error("{}: write failed: {}", path_, std::strerror(errno));
        }
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
    if (size < kHeaderBytes || std::memcmp(p, kMagic, sizeof kMagic) != 0) {
        throw make_error("{}: not a KL-divergence base file (written by tessera perplexity --kl-divergence-base)", path);
    }
    const uint32_t version = get<uint32_t>(p + 8);
    if (version != kVersion) throw make_error("{}: KL base file version {} (this build reads {})", path, version, kVersion);
    header_.n_vocab = get<uint32_t>(p + 12);
    header_.plan.n_ctx = static_cast<int>(get<uint32_t>(p + 16));
    header_.plan.first = static_cast<int>(get<uint32_t>(p + 20));
    header_.plan.n_chunk = static_cast<int>(get<uint32_t>(p + 24));
    header_.vocab_fingerprint = get<uint64_t>(p + 32);
    const ChunkPlan& plan = header_.plan;
    if (header_.n_vocab == 0 || header_.n_vocab > (1u << 24) || plan.n_ctx < 4 || plan.n_ctx > (1 << 24) ||
        plan.first < 0 || plan.first >= plan.n_ctx - 1 || plan.n_chunk <= 0) {
        throw make_error("{}: corrupt header (n_vocab {}, n_ctx {}, first {}, n_chunk {})", path, header_.n_vocab,
                         plan.n_ctx, plan.first, plan.n_chunk);
    }
    const uint64_t n_inputs = checked_mul(static_cast<uint64_t>(plan.n_chunk), static_cast<uint64_t>(plan.n_ctx), "inputs");
    rows_offset_ = checked_add(kHeaderBytes, checked_mul(n_inputs, 4, "inputs"), "inputs");
    const uint64_t n_rows = checked_mul(static_cast<uint64_t>(plan.n_chunk), static_cast<uint64_t>(plan.n_scored()), "rows");
    const uint64_t expected = checked_add(rows_offset_, checked_mul(n_rows, kl_row_bytes(header_.n_vocab), "rows"), "file");
    if (size != expected) {
        throw make_error("{}: {} bytes, but its header ({} chunks of {} tokens, {} vocabulary entries) needs {}: "
                         "truncated or corrupt",
                         path, size, plan.n_chunk, plan.n_ctx, header_.n_vocab, expected);
    }
    inputs_.resize(n_inputs);
    std::memcpy(inputs_.data(), p + kHeaderBytes, n_inputs * 4);
    for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i] < 0 || static_cast<uint32_t>(inputs_[i]) >= header_.n_vocab) {
            throw make_error("{}: token {} at input {} is outside the vocabulary of {}", path, inputs_[i], i,
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

double KlResult::max_kld() const {
    return kld_values.empty() ? 0.0 : *std::max_element(kld_values.begin(), kld_values.end());
}

double KlResult::min_kld() const {
    return kld_values.empty() ? 0.0 : *std::min_element(kld_values.begin(), kld_values.end());
}

double KlResult::kld_quantile(double p) const {
    if (kld_values.empty()) return 0.0;
    std::vector<float> sorted = kld_values;
    std::sort(sorted.begin(), sorted.end());
    const double at = std::clamp(p, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
    return sorted[static_cast<size_t>(std::llround(at))];
}

double KlResult::nll_correlation() const {
    const double n = static_cast<double>(nll.count);
    if (nll.count < 2) return 0.0;
    const double cov = sum_nll_product / n - nll.mean() * nll_base.mean();
    const double var_a = nll.sum2 / n - nll.mean() * nll.mean();
    const double var_b = nll_base.sum2 / n - nll_base.mean() * nll_base.mean();
    return var_a > 0.0 && var_b > 0.0 ? cov / std::sqrt(var_a * var_b) : 0.0;
}

KlResult compute_kl_divergence(Decoder& decoder, const KlBaseFile& base, int n_chunks,
                               const std::function<void(const KlChunkReport&)>& on_chunk) {
    const KlBaseHeader& header = base.header();
    const int64_t n_vocab = decoder.hparams().n_vocab;
    if (n_vocab != static_cast<int64_t>(header.n_vocab)) {
        throw make_error("{}: written with a vocabulary of {} tokens, but this model has {}", base.path(),
                         header.n_vocab, n_vocab);
    }
    KlResult r;
    r.plan = header.plan;
    if (n_chunks >= 0) r.plan.n_chunk = std::min(r.plan.n_chunk, n_chunks);
    if (r.plan.n_chunk == 0) throw make_error("--chunks 0 leaves nothing to evaluate");
    const std::span<const int32_t> inputs = base.inputs();
    std::vector<float> base_lp(static_cast<size_t>(n_vocab));
    r.kld_values.reserve(static_cast<size_t>(r.plan.n_chunk) * r.plan.n_scored());
    for (int c = 0; c < r.plan.n_chunk; ++c) {
        const double t0 = now_seconds();
        const float* logits = eval_chunk(decoder, inputs, r.plan, c);
        const double seconds = now_seconds() - t0;
        const std::span<const int32_t> chunk = inputs.subspan(static_cast<size_t>(c) * r.plan.n_ctx, r.plan.n_ctx);
        for (int i = r.plan.first; i < r.plan.n_ctx - 1; ++i) {
            const float* q = logits + static_cast<int64_t>(i) * n_vocab;
            const uint8_t* row = base.row(c, i - r.plan.first);
            const int32_t target = chunk[static_cast<size_t>(i) + 1];
            const double lse = log_sum_exp(q, n_vocab);
            int32_t top = 0;
            for (int64_t v = 1; v < n_vocab; ++v) {
                if (q[v] > q[top]) top = static_cast<int32_t>(v);
            }
            decode_log_probs(row, n_vocab, base_lp.data());
            double kl = 0.0;
            for (int64_t v = 0; v < n_vocab; ++v) {
                if (std::isinf(base_lp[v])) continue;
                const double lp = base_lp[v];
                kl += std::exp(lp) * (lp - (q[v] - lse));
            }
            // KL is never negative; a value just below 0 is the rounding of a 0.
            kl = std::max(kl, 0.0);
            const double nll = lse - q[target];
            const double nll_base = -static_cast<double>(get<float>(row + 12));
            r.nll.add(nll);
            r.nll_base.add(nll_base);
            r.ln_ratio.add(nll - nll_base);
            r.sum_nll_product += nll * nll_base;
            r.kld.add(kl);
            r.kld_values.push_back(static_cast<float>(kl));
            if (top == get<int32_t>(row + 8)) ++r.n_same_top;
        }
        if (on_chunk) {
            on_chunk({c, r.plan.n_chunk, r.nll.ppl(), r.ln_ratio.mean(), r.ln_ratio.mean_error(), r.kld.mean(),
                      r.kld.mean_error(), r.same_top(), r.same_top_error(), seconds});
        }
    }
    return r;
}

PerplexityResult write_kl_base(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan,
                               uint64_t vocab_fingerprint, const std::string& path,
                               const std::function<void(const ChunkReport&)>& on_chunk) {
    KlBaseHeader header;
    header.n_vocab = static_cast<uint32_t>(decoder.hparams().n_vocab);
    header.plan = plan;
    header.vocab_fingerprint = vocab_fingerprint;
    KlBaseWriter writer(path, header, inputs);
    PerplexityResult result = compute_perplexity(decoder, inputs, plan, on_chunk,
                                                 [&](int, std::span<const int32_t> chunk, const float* logits) {
                                                     writer.write_chunk(chunk, logits);
                                                 });
    writer.finish();
    return result;
}

}  // namespace tessera
