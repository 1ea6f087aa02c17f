// KL divergence of a model's next-token distributions from a base model's,
// over the scored positions of a perplexity run (llama-perplexity's
// --kl-divergence-base / --kl-divergence): the base run saves its inputs and
// the log-probabilities of every scored position to a file; a run of another
// model (same vocabulary) over the same inputs compares against them.
//
// Base file, version 1 (little-endian; "compact": 2 bytes per vocabulary entry
// and scored position, as llama.cpp's):
//   offset  size  field
//        0     8  magic "TSKLBASE"
//        8     4  u32 version = 1
//       12     4  u32 n_vocab
//       16     4  u32 n_ctx    tokens per chunk
//       20     4  u32 first    first scored position of a chunk (n_ctx / 2)
//       24     4  u32 n_chunk
//       28     4  u32 reserved = 0
//       32     8  u64 vocabulary fingerprint (vocab_fingerprint below)
//       40        i32 inputs[n_chunk * n_ctx]  the tokens fed (BOS at each chunk start)
//        then n_chunk * (n_ctx - 1 - first) rows, chunk by chunk, one per
//        scored position i (predicting inputs[i + 1]), 16 + 2 * n_vocab bytes:
//           f32 lo           log-probability of code 1
//           f32 step         log-probability per code step
//           i32 top          the most probable token (ties: the lowest id)
//           f32 target_logp  exact log-probability of the next input token
//           u16 code[n_vocab]  0: below lo (less than e^-25 of the top token,
//                            left out of the KL sum); c >= 1: lo + (c - 1) * step
// lo is the smallest log-probability, but at most 25 below the largest, so a
// step is at most 25/65534 (a log-probability error of at most 1.9e-4).
#pragma once

#include "engine/perplexity.h"
#include "model/vocab.h"
#include "util/mapped_file.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// FNV-1a 64 of every token string (each followed by a zero byte): two models
// compare only when their vocabularies are the same.
uint64_t vocab_fingerprint(const Vocab& vocab);

struct KlBaseHeader {
    uint32_t n_vocab = 0;
    ChunkPlan plan;
    uint64_t vocab_fingerprint = 0;
};

// Bytes of one scored position's row for a vocabulary of n_vocab.
uint64_t kl_row_bytes(int64_t n_vocab);

// Encodes the distribution softmax(logits) and the next token's exact
// log-probability into a row of kl_row_bytes(n_vocab) bytes.
void encode_log_probs(const float* logits, int64_t n_vocab, int32_t target, uint8_t* row);

// The row's log-probabilities, renormalized over the tokens it keeps;
// -infinity for those below its floor.
void decode_log_probs(const uint8_t* row, int64_t n_vocab, float* log_probs);

// Streams a base file out; throws an Error naming the path on I/O failure.
class KlBaseWriter {
public:
    KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> inputs);
    ~KlBaseWriter();
    KlBaseWriter(const KlBaseWriter&) = delete;
    KlBaseWriter& operator=(const KlBaseWriter&) = delete;

    // The logits of all n_ctx positions of the next chunk (in order).
    void write_chunk(std::span<const int32_t> chunk_inputs, const float* logits);
    // Checks every chunk was written and flushes.
    void finish();

private:
    std::string path_;
    KlBaseHeader header_;
    std::FILE* file_ = nullptr;
    int chunks_written_ = 0;
    std::vector<uint8_t> row_;
};

// A base file, mapped and validated (magic, version, sizes, token ids).
class KlBaseFile {
public:
    explicit KlBaseFile(const std::string& path);

    const std::string& path() const { return file_.path(); }
    const KlBaseHeader& header() const { return header_; }
    std::span<const int32_t> inputs() const { return inputs_; }
    // Row of scored position i (0-based among the chunk's scored ones) of chunk c.
    const uint8_t* row(int c, int i) const;

private:
    MappedFile file_;
    KlBaseHeader header_;
    std::vector<int32_t> inputs_;
    uint64_t rows_offset_ = 0;
};

struct KlChunkReport {
    int index = 0;
    int n_chunk = 0;
    double ppl = 0.0;              // running PPL of the model
    double ln_ratio = 0.0;         // running mean of ln(PPL(model)/PPL(base))
    double ln_ratio_error = 0.0;
    double kld = 0.0;              // running mean KL divergence
    double kld_error = 0.0;
    double same_top = 0.0;         // running fraction of positions with the same top token
    double same_top_error = 0.0;
    double seconds = 0.0;
};

struct KlResult {
    ChunkPlan plan;
    NllStats nll;        // this model's
    NllStats nll_base;   // the base model's (from the file)
    NllStats ln_ratio;   // per token: nll - nll_base
    NllStats kld;        // per token KL(base || model)
    double sum_nll_product = 0.0;  // sum of nll * nll_base, for the correlation
    size_t n_same_top = 0;
    std::vector<float> kld_values;

    double same_top() const;        // fraction in [0, 1]
    double same_top_error() const;  // its standard error
    double max_kld() const;
    double min_kld() const;
    // The KL value below which a fraction p of positions fall (nearest rank).
    double kld_quantile(double p) const;
    // Pearson correlation of the two models' per-token nll.
    double nll_correlation() const;
};

// Evaluates the first n_chunk chunks of the base file's inputs (all when
// n_chunks < 0) with `decoder` and compares against the file. The decoder's
// vocabulary must match the file's (n_vocab; the caller checks the fingerprint).
KlResult compute_kl_divergence(Decoder& decoder, const KlBaseFile& base, int n_chunks,
                               const std::function<void(const KlChunkReport&)>& on_chunk = {});

// A perplexity run that also writes the base file.
PerplexityResult write_kl_base(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan,
                               uint64_t vocab_fingerprint, const std::string& path,
                               const std::function<void(const ChunkReport&)>& on_chunk = {});

}  // namespace tessera
