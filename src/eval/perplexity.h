// Perplexity of a model over a text, computed as llama.cpp's llama-perplexity
// computes it, so the numbers of the two programs can be compared:
//   - the whole text is tokenized once (with BOS) and cut into chunks of
//     n_ctx tokens (the tail that does not fill a chunk is dropped);
//   - each chunk is evaluated on its own from position 0, its first token
//     replaced by BOS so every chunk starts like a document;
//   - only the second half of a chunk is scored: the logits at positions
//     first = n_ctx/2 .. n_ctx-2 predict tokens first+1 .. n_ctx-1, so every
//     scored token has at least n_ctx/2 tokens of context;
//   - PPL = exp(mean negative log-likelihood), with llama.cpp's error estimate
//     PPL * stddev(nll) / sqrt(count - 1), and the running PPL after each chunk.
//
// Re-evaluating from position 0 needs no fresh decoder: positions 0..p of the
// KV cache are written before position p attends to them, so whatever an
// earlier chunk left there is overwritten before it could be read.
#pragma once

#include "model/decoder.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tessera {

struct PerplexityParams {
    int n_ctx = 512;     // tokens per chunk
    int n_chunks = -1;   // chunks to evaluate (< 0: every whole chunk of the text)
};

// How a token sequence is cut and scored.
struct ChunkPlan {
    int n_ctx = 0;    // tokens per chunk
    int first = 0;    // logits of positions [first, n_ctx - 1) are scored
    int n_chunk = 0;
    int n_scored() const { return n_ctx - 1 - first; }  // scored tokens per chunk
};

// Throws an Error when the text has fewer than n_ctx tokens (not one chunk)
// or n_ctx is too small to score anything.
ChunkPlan plan_chunks(size_t n_tokens, const PerplexityParams& params);

// The tokens the model is fed: chunk c is tokens[c*n_ctx, (c+1)*n_ctx) with
// its first token replaced by `bos` (when bos >= 0); n_chunk * n_ctx ids.
std::vector<int32_t> chunk_inputs(std::span<const int32_t> tokens, const ChunkPlan& plan, int32_t bos);

// Sums of negative log-likelihoods and the statistics llama.cpp prints.
struct NllStats {
    double sum = 0.0;
    double sum2 = 0.0;
    size_t count = 0;

    void add(double nll) {
        sum += nll;
        sum2 += nll * nll;
        ++count;
    }
    double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
    // Standard error of the mean nll (0 with fewer than two values).
    double mean_error() const;
    double ppl() const;
    double ppl_error() const { return ppl() * mean_error(); }
};

// log(sum(exp(logits))), computed stably in double (max + log sum exp(x - max)).
double log_sum_exp(const float* logits, int64_t n);

struct ChunkReport {
    int index = 0;           // 0-based chunk just finished
    int n_chunk = 0;
    double ppl = 0.0;        // running estimate over chunks 0..index
    double seconds = 0.0;    // time to evaluate this chunk
};

struct PerplexityResult {
    ChunkPlan plan;
    NllStats nll;
    std::vector<double> chunk_ppl;  // running estimate after each chunk
};

// Called with each chunk's index, its input tokens and the logits of all its
// n_ctx positions (n_vocab floats each), before they are scored.
using ChunkLogitsFn = std::function<void(int chunk, std::span<const int32_t> inputs, const float* logits)>;

// Evaluates chunk `c` of `inputs` (from chunk_inputs) from position 0 and
// returns the logits of its n_ctx positions (valid until the next eval).
const float* eval_chunk(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan, int c);

// Scores every chunk of `inputs`. The decoder's context must hold n_ctx.
PerplexityResult compute_perplexity(Decoder& decoder, std::span<const int32_t> inputs, const ChunkPlan& plan,
                                    const std::function<void(const ChunkReport&)>& on_chunk = {},
                                    const ChunkLogitsFn& on_logits = {});

}  // namespace tessera
