// Attention of one generated token over a long history, alone: a KV cache of
// the 1.1B shape (22 layers, 4 KV heads, 8 query heads per KV head, heads of
// 64) filled with random rows to each depth, then one position's attention
// over every layer, dense against sparse, for each cache type. The cost of
// attention does not depend on the rows' values (sparse's candidates depend
// only on positions), so random rows time what a real history would.
//
//   attention_bench [--depths 1024,4096,8192,32768] [--threads 2] [--reps 20]
//                   [--layers 22 --kv-heads 4 --q-per-kv 8 --head-dim 64]
//                   [--window 128 --block 64 --globals 1]
//
// Prints, per depth and cache type: microseconds per token (all layers) and
// the pairs one query head reads, dense and sparse, and their ratios. Not a
// test: the figures depend on the machine; ratios are measured in the same run.
#include "attn/attention.h"
#include "attn/sparse_pattern.h"
#include "util/rng.h"
#include "util/thread_pool.h"
#include "util/timer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

namespace tessera {
namespace {

struct Shape {
    int layers = 22, kv_heads = 4, q_per_kv = 8, head_dim = 64;
};

// Microseconds of one token's attention over `depth` cached positions, every
// layer: the best of `reps` runs (a shared machine's noise only adds time).
double time_token(const Shape& s, KvCache& cache, Attention& attention, ThreadPool& pool, int depth,
                  const AttentionOptions& options, int reps, std::vector<float>& q, std::vector<float>& out) {
    const int nq = s.kv_heads * s.q_per_kv;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const double start = now_seconds();
        for (int layer = 0; layer < s.layers; ++layer) {
            attention.attend(cache, layer, depth, 1, q.data(), nq * s.head_dim, nq, s.q_per_kv, out.data(),
                             nq * s.head_dim, pool, options);
        }
        best = std::min(best, now_seconds() - start);
    }
    return best * 1e6;
}

int run(int argc, char** argv) {
    CLI::App app{"one token's attention over a long history: dense against sparse"};
    Shape s;
    std::string depths_text = "1024,4096,8192,32768";
    int threads = 2, reps = 20;
    SparseOptions sparse;
    sparse.enabled = true;
    app.add_option("--depths", depths_text);
    app.add_option("--threads", threads);
    app.add_option("--reps", reps);
    app.add_option("--layers", s.layers);
    app.add_option("--kv-heads", s.kv_heads);
    app.add_option("--q-per-kv", s.q_per_kv);
    app.add_option("--head-dim", s.head_dim);
    app.add_option("--window", sparse.window);
    app.add_option("--block", sparse.block);
    app.add_option("--globals", sparse.globals);
    CLI11_PARSE(app, argc, argv);
    std::vector<int> depths;
    std::stringstream in(depths_text);
    for (std::string item; std::getline(in, item, ',');) depths.push_back(std::stoi(item));

    ThreadPool pool(threads);
    const int nq = s.kv_heads * s.q_per_kv;
    std::vector<float> q(static_cast<size_t>(nq) * s.head_dim), out(q.size());
    Rng rng(1);
    for (float& x : q) x = rng.next_normal();
    std::printf("%-7s %-6s %12s %12s %9s %12s %12s %8s %10s\n", "depth", "cache", "dense us", "sparse us", "speedup",
                "dense pairs", "sparse pairs", "ratio", "KV MiB");
    for (int depth : depths) {
        for (QuantType type : {QuantType::F16, QuantType::Q8_0}) {
            KvCache cache(s.layers, s.kv_heads, s.head_dim, depth + 1, type);
            cache.enable_landmarks(sparse.block);
            std::vector<float> k(static_cast<size_t>(s.kv_heads) * s.head_dim), v(k.size());
            for (int layer = 0; layer < s.layers; ++layer) {
                for (int p = 0; p <= depth; ++p) {
                    for (float& x : k) x = rng.next_normal();
                    for (float& x : v) x = rng.next_normal();
                    cache.store(layer, p, k.data(), v.data());
                }
            }
            Attention attention(depth + 1, s.head_dim, s.kv_heads, pool.size());
            AttentionOptions dense_options, sparse_options;
            sparse_options.sparse = sparse;
            const double dense_us = time_token(s, cache, attention, pool, depth, dense_options, reps, q, out);
            const double sparse_us = time_token(s, cache, attention, pool, depth, sparse_options, reps, q, out);
            SparseCandidates c;
            sparse_candidates(depth, sparse, c);
            const uint64_t sparse_pairs = static_cast<uint64_t>(depth - c.window_begin + 1) + c.tokens.size() +
                                          c.blocks.size();
            std::printf("%-7d %-6s %12.1f %12.1f %8.1fx %12d %12llu %7.1fx %10.1f\n", depth, quant_type_name(type),
                        dense_us, sparse_us, dense_us / sparse_us, depth + 1,
                        static_cast<unsigned long long>(sparse_pairs), (depth + 1.0) / static_cast<double>(sparse_pairs),
                        cache.bytes() / 1048576.0);
            std::fflush(stdout);
        }
    }
    return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::run(argc, argv); }
