// KL divergence of a model's next-token distributions from a base model's,
// over the scored positions of a perplexity run (llama-perplexity's
// --kl-divergence-base / --kl-divergence): the base run saves its tokens and
// the distributions of every scored position to a file; a run of another
// model (same vocabulary) over the same tokens compares against them.
//
// Base file: llama.cpp's own format, byte for byte as llama-perplexity writes
// and reads it (tools/perplexity/perplexity.cpp: the logits_stream writes, the
// reads of kl_divergence()), so each program reads the other's files.
// Native byte order (little-endian everywhere we run), no padding, no version:
//   offset  size  field
//        0     8  magic "_logits_"
//        8     4  i32 n_ctx     tokens per chunk
//       12     4  i32 n_vocab
//       16     4  i32 n_chunk
//       20        i32 tokens[n_chunk * n_ctx]  the text's tokens as tokenized
//                 (BOS only where the tokenizer put it, at the start of the
//                 text); when the vocabulary adds BOS, the first token of each
//                 chunk is replaced by BOS in what is evaluated, not in the file
//   then, chunk by chunk, one row per scored position i in [first, n_ctx - 1),
//   first = n_ctx / 2 (the logits at i predict tokens[i + 1]), of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 u16 values (2 * nv bytes):
//        f32 scale
//        f32 min_log_prob
//        u16 code[n_vocab]
//        u16 0              only when n_vocab is odd (nv is even)
// A row encodes log_softmax(logits): with max and min the largest and smallest
// logit, min_logit = max(min, max - 16), scale = (max - min_logit) / 65535,
// code[v] = nearest_int((logit[v] - min_logit) / scale) for logits above
// min_logit and 0 otherwise (all 0 when scale is 0), and min_log_prob the
// log-probability of min_logit. It decodes as
//   log p[v] = scale * code[v] + min_log_prob
// to within scale / 2 <= 1.3e-4; tokens 16 or more below the top logit all
// decode to min_log_prob (<= -16) and are left out of the KL sum.
//
// The format holds no vocabulary fingerprint: only n_vocab is checked, so two
// vocabularies of the same size but other tokens are not told apart (neither
// does llama.cpp). The tokens in the file, and a -f text checked against them,
// are the remaining guard.
#pragma once

#include "eval/perplexity.h"
#include "util/mapped_file.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tessera {

struct KlBaseHeader {
    int32_t n_vocab = 0;
    ChunkPlan plan;  // n_ctx, first = n_ctx / 2, n_chunk
};

// u16 values of one scored position's row: 2 * ((n_vocab + 1) / 2) + 4.
uint64_t kl_row_values(int64_t n_vocab);
// Bytes of one row: 2 * kl_row_values(n_vocab).
uint64_t kl_row_bytes(int64_t n_vocab);

// Encodes the distribution softmax(logits) into a row of kl_row_bytes(n_vocab)
// bytes, with llama.cpp's arithmetic (float, as its log_softmax).
void encode_log_probs(const float* logits, int64_t n_vocab, uint8_t* row);

// The row's log-probabilities, scale * code + min_log_prob (not renormalized:
// llama.cpp compares against these values as they are).
void decode_log_probs(const uint8_t* row, int64_t n_vocab, float* log_probs);

// Streams a base file out; throws an Error naming the path on I/O failure.
class KlBaseWriter {
public:
    // `tokens`: the text's first n_chunk * n_ctx tokens, without BOS substituted.
    KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> tokens);
    ~KlBaseWriter();
    KlBaseWriter(const KlBaseWriter&) = delete;
    KlBaseWriter& operator=(const KlBaseWriter&) = delete;

    // The logits of all n_ctx positions of the next chunk (in order); the
    // rows of its scored positions are written.
    void write_chunk(const float* logits);
    // Checks every chunk was written and flushes.
    void finish();

private:
    std::string path_;
    KlBaseHeader header_;
    std::FILE* file_ = nullptr;
    int chunks_written_ = 0;
    std::vector<uint8_t> rows_;
};

// A base file, mapped and validated (magic, sizes, token ids) when opened.
class KlBaseFile {
public:
    explicit KlBaseFile(const std::string& path);

    const std::string& path() const { return file_.path(); }
    const KlBaseHeader& header() const { return header_; }
    // The text's tokens, n_chunk * n_ctx, as stored (no BOS substituted).
    std::span<const int32_t> tokens() const { return tokens_; }
    // Row of scored position i (0-based among the chunk's scored ones) of chunk c.
    const uint8_t* row(int c, int i) const;

private:
    MappedFile file_;
    KlBaseHeader header_;
    std::vector<int32_t> tokens_;
    uint64_t rows_offset_ = 0;
};

struct KlChunkReport {
    int index = 0;
    int n_chunk = 0;
    double ppl = 0.0;              // running PPL of the model
    double ppl_error = 0.0;
    double ln_ratio = 0.0;         // running mean of ln(PPL(model)/PPL(base))
    double ln_ratio_error = 0.0;
    double kld = 0.0;              // running mean KL divergence
    double kld_error = 0.0;
    double p_diff_rms = 0.0;       // running RMS of p(next token) - p_base(next token)
    double p_diff_rms_error = 0.0;
    double same_top = 0.0;         // running fraction of positions with the same top token
    double same_top_error = 0.0;
    double seconds = 0.0;
};

struct KlResult {
    ChunkPlan plan;
    NllStats nll;        // this model's
    NllStats nll_base;   // the base model's (from the file's codes)
    NllStats ln_ratio;   // per token: nll - nll_base
    NllStats kld;        // per token KL(base || model)
    NllStats p_diff;     // per token: p - p_base of the next token
    NllStats p_diff2;    // per token: (p - p_base)^2
    double sum_nll_product = 0.0;  // sum of nll * nll_base, for the correlation
    size_t n_same_top = 0;
    std::vector<float> kld_values;
    std::vector<float> p_diff_values;

    double same_top() const;        // fraction in [0, 1]
    double same_top_error() const;  // its standard error
    double p_diff_rms() const;
    double p_diff_rms_error() const;
    // Standard error of PPL(Q) - PPL(base), from both errors and their covariance.
    double ppl_diff_error() const;
    double max_kld() const;
    double min_kld() const;
    // The value below which a fraction p of positions fall, interpolated
    // between ranks as llama.cpp's percentile (p = 0.5: its median).
    double kld_quantile(double p) const;
    double p_diff_quantile(double p) const;
    // Pearson correlation of the two models' per-token nll.
    double nll_correlation() const;
};

// Evaluates the first n_chunks chunks of the base file's tokens (all when
// n_chunks < 0), each chunk's first token replaced by `bos` (when bos >= 0, as
// chunk_inputs), with `decoder` and compares against the file, computing each
// position's values as llama.cpp's kl_divergence does. Throws an Error when the
// decoder's n_vocab differs from the file's.
KlResult compute_kl_divergence(Decoder& decoder, const KlBaseFile& base, int32_t bos, int n_chunks,
                               const std::function<void(const KlChunkReport&)>& on_chunk = {});

// A perplexity run that also writes the base file: `tokens` is the tokenized
// text (at least plan.n_chunk * plan.n_ctx), evaluated as chunk_inputs(tokens,
// plan, bos) and stored as it is.
PerplexityResult write_kl_base(Decoder& decoder, std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t bos,
                               const std::string& path, const std::function<void(const ChunkReport&)>& on_chunk = {});

}  // namespace tessera
