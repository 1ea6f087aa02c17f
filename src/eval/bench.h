// `tessera bench`: llama-bench's two figures (and its -d, a history before them) for one model and thread count,
// pp (a prompt of n_prompt tokens in batches, from an empty context) and tg
// (n_gen tokens generated one at a time, from an empty context), each repeated
// and reported as min and median tokens/s, plus the memory-bandwidth view of
// generation: bytes of weights read per token, this machine's measured read
// bandwidth, and the fraction of that ceiling generation reaches.
#pragma once

#include "attn/kv_cache.h"
#include "engine/decoder_setup.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct BenchParams {
    std::string model_path;
    int n_prompt = 512;
    int n_gen = 128;
    int n_threads = 1;
    int reps = 5;
    int n_batch = 512;
    KvCacheTypes kv_types;
    SparseOptions sparse;
    ParallelOptions parallel;
    // llama-bench's -d: pp and tg run after `depth` positions of history.
    // The history is a prompt of random tokens evaluated first (untimed), or
    // with depth_random random K/V rows stored straight into the cache (one
    // process only): attention's cost depends on how many rows it reads, not
    // their values, and a 32K history then takes seconds, not many minutes.
    int depth = 0;
    bool depth_random = false;
    // Every logit of each token crosses the wire of a distributed plan
    // (perplexity and logprobs need them); else only those a default
    // sampler reads, its top 40 (model/decoder.h LogitsNeed), as `run` does.
    bool all_logits = false;
};

struct BenchRate {
    int tokens = 0;
    std::vector<double> tps;  // one per repetition
    double min() const;
    double median() const;
};

struct BenchResult {
    std::string model_type;  // the type of most weight bytes, e.g. Q4_0
    uint64_t model_bytes = 0;
    uint64_t n_params = 0;
    BenchRate pp;
    BenchRate tg;
    uint64_t weight_bytes_per_token = 0;
    uint64_t layer_weight_bytes_per_token = 0;  // the part a tensor-parallel plan splits
    // Of it, the products that end a layer's attention and FFN (what bands
    // of a partial overlap with its transfer: benchmarks/tensor_parallel.sh).
    uint64_t wo_bytes_per_token = 0, w_down_bytes_per_token = 0;
    // Each generation repetition's ceiling, the higher of the read bandwidths
    // a read loop sustains just before and just after it, each over as long
    // as the repetition (tg.tps[r] pairs with tg_ceiling_gbs[r]), and their
    // median. Without a tg test, the bandwidth sustained over one second.
    std::vector<double> tg_ceiling_gbs;
    double mem_bandwidth_gbs = 0.0;
    // The best single read of a few milliseconds (util/mem_bandwidth.h), for
    // reference: on a shared host, a peak no loop sustains.
    double mem_peak_gbs = 0.0;
    // The read loop's buffer: at least twice the largest cache.
    uint64_t probe_bytes = 0;
    // How the read loop prefetched: the fastest of "none", "l2", "l2+l1" here.
    std::string probe_prefetch;
    // Tensor parallel only: per generated token, payload bytes to and from
    // each worker, and the root's time computing its share vs waiting.
    int ranks = 1;
    bool sealed = false;        // every worker's frames sealed
    std::string moe_split;      // how a mixture of experts' experts split ("": a dense model)
    double handshake_ms = 0.0;  // the slowest worker's key handshake (connect to first sealed frame)
    double wire_bytes_per_token_per_worker = 0.0;
    double own_ms_per_token = 0.0;
    double wait_ms_per_token = 0.0;
    // Of wait_ms_per_token, at the attention and at the FFN syncs (the rest
    // waits for the head's logits).
    double attention_wait_ms_per_token = 0.0;
    double ffn_wait_ms_per_token = 0.0;
    int syncs_per_token = 0;
    // Weight bytes per token x the median generation rate, and the median
    // over repetitions of the share of its own ceiling each one reached.
    double tg_bandwidth_gbs() const;
    double tg_bandwidth_fraction() const;
    // The median generation bandwidth over the peak.
    double tg_peak_fraction() const;
};

BenchResult run_bench(const BenchParams& params);

}  // namespace tessera
