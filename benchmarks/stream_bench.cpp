// How close a grouped matrix-vector product comes to a plain read loop when
// both stream from memory: the share of the bandwidth ceiling the product
// itself reaches, apart from everything else a token does (attention, norms,
// the pool's hand-offs between products). `tessera bench` gives the whole
// token's share; this gives the matmul's, so the gap between them is the
// rest of the token.
//
// One matrix of `--mib` MiB (at least twice the last-level cache) in the group layout
// where the CPU target has a grouped kernel for the type (elsewhere, and F32 always:
// GGUF's rows, as a model holds them),
// `--cols` columns, its rows repeating 64 random rows quantized by the scalar
// reference; one activation column; matmul over the whole matrix on a pool of
// each thread count, alternated with the read loop `tessera bench` measures
// its ceiling with, for each prefetch policy (ops/group_prefetch.h), in
// rounds: on a shared host the bandwidth drifts from second to second, and
// neighbouring runs see the same host. Prints each policy's median GB/s and
// the median over rounds of each round's product / read loop.
//
// `make stream_bench && ./stream_bench [--types "Q4_0 Q8_0 Q4_K"]
//  [--threads "1 2"] [--cols 2048] [--mib 1024] [--rounds 7]`
// Not a test: the figures depend on the machine.
#include "ops/cpu_target.h"
#include "ops/group_prefetch.h"
#include "ops/matmul.h"
#include "ops/matrix.h"
#include "ops/matvec.h"
#include "ops/quant_traits.h"
#include "ops/row_groups.h"
#include "util/anonymous_memory.h"
#include "util/cpu_caches.h"
#include "util/error.h"
#include "util/mem_bandwidth.h"
#include "util/rng.h"
#include "util/thread_pool.h"
#include "util/timer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tessera {
namespace {

constexpr int64_t kDistinctRows = 64;
// Each timed run lasts at least this long (several passes over the matrix if
// one is shorter), and the read loop runs as long as the product did.
constexpr double kRunSeconds = 0.3;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Grouped {
    AnonymousMemory bytes;
    Matrix m;
};

Grouped make_matrix(QuantType type, int64_t cols, uint64_t mib) {
    const QuantTraits& ref = *scalar_traits(type);
    const uint64_t row_bytes = quant_row_bytes(type, cols);
    std::vector<uint8_t> distinct(static_cast<size_t>(kDistinctRows * row_bytes));
    std::vector<float> x(static_cast<size_t>(cols));
    Rng rng(1);
    for (int64_t r = 0; r < kDistinctRows; ++r) {
        for (float& v : x) v = rng.next_normal();
        ref.from_float(x.data(), distinct.data() + r * row_bytes, cols);
    }
    const int64_t rows = static_cast<int64_t>((mib << 20) / row_bytes) / kGroupRows * kGroupRows;
    if (!has_group_layout(type) || compute_traits(type)->vec_dot_groups == nullptr) {
        // As copy_to_private_memory lays out a matrix: GGUF's rows.
        Grouped g{AnonymousMemory(static_cast<uint64_t>(rows) * row_bytes), Matrix{type, cols, rows, row_bytes, nullptr}};
        for (int64_t r = 0; r < rows; ++r) {
            std::memcpy(g.bytes.data() + r * row_bytes, distinct.data() + (r % kDistinctRows) * row_bytes, row_bytes);
        }
        g.m.data = g.bytes.data();
        return g;
    }
    const GroupPanels panels = GroupPanels::for_matrix(type, cols, rows / kGroupRows);
    // The rows in GGUF's layout a group's worth at a time: the whole matrix
    // only ever exists grouped.
    Grouped g{AnonymousMemory(panels.total_bytes()), Matrix{type, cols, rows, row_bytes, nullptr}};
    std::vector<uint8_t> plain(static_cast<size_t>(rows * row_bytes));
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(plain.data() + r * row_bytes, distinct.data() + (r % kDistinctRows) * row_bytes, row_bytes);
    }
    group_matrix(panels, plain.data(), row_bytes, rows, g.bytes.data());
    g.m.data = g.bytes.data();
    g.m.grouped = true;
    g.m.panel_cols = panels.panel_cols;
    return g;
}

int run(int argc, char** argv) {
    CLI::App app{"A grouped matrix-vector product streaming from memory against a read loop"};
    std::vector<std::string> types = {"Q4_0", "Q8_0", "Q4_K"};
    std::vector<int> threads = {1, 2};
    int64_t cols = 2048;
    uint64_t mib = 1024;
    int rounds = 7;
    app.add_option("--types", types, "Weight types")->delimiter(' ');
    app.add_option("--threads", threads, "Thread counts")->delimiter(' ')->check(CLI::Range(1, 1024));
    app.add_option("--cols", cols, "Columns (a multiple of 256)")->check(CLI::Range(int64_t{256}, int64_t{65536}));
    app.add_option("--mib", mib, "MiB of weights (at least twice the last-level cache)")
        ->check(CLI::Range(uint64_t{64}, uint64_t{8192}));
    app.add_option("--rounds", rounds, "Alternating rounds")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    limit_cpu_target_from_environment();  // TESSERA_CPU_TARGET=avx2 measures the AVX2 kernels
    if (cols % 256 != 0) throw make_error("--cols must be a multiple of 256 (got {})", cols);
    // Weights that fit the last-level cache stream from it, not from memory
    // (64 MiB read at 1.6x the read loop on a host with 260 MiB of L3).
    const uint64_t llc = last_level_cache_bytes();
    if (llc > 0 && (mib << 20) < 2 * llc) {
        throw make_error("--mib {} is less than twice this CPU's last-level cache ({} MiB): the weights would stream "
                         "from the cache",
                         mib, llc >> 20);
    }

    const GroupPrefetch policies[] = {GroupPrefetch::kL2, GroupPrefetch::kL2AndL1, GroupPrefetch::kNone};
    constexpr int kPolicies = 3;
    std::printf("%lld columns, %llu MiB of weights, %d rounds; CPU target %s; default prefetch here: %s\n",
                static_cast<long long>(cols), static_cast<unsigned long long>(mib), rounds, cpu_target_name().c_str(),
                group_prefetch_name(default_group_prefetch()));
    std::printf("| type | threads | prefetch | read loop GB/s | matmul GB/s | matmul / read loop |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (const std::string& name : types) {
        const std::optional<QuantType> parsed = parse_quant_type(name);
        if (!parsed) throw make_error("unknown type {}", name);
        const QuantType type = *parsed;
        Grouped g = make_matrix(type, cols, mib);
        const uint64_t weight_bytes = g.m.grouped
                                          ? GroupPanels::for_matrix(type, cols, g.m.rows / kGroupRows).total_bytes()
                                          : static_cast<uint64_t>(g.m.rows) * g.m.row_bytes;
        std::vector<float> xs(static_cast<size_t>(cols));
        Rng rng(2);
        for (float& v : xs) v = rng.next_normal();
        QuantizedActivation x;
        x.quantize(xs.data(), cols, compute_traits(type)->vec_dot_type, 1);
        std::vector<float> y(static_cast<size_t>(g.m.rows));
        for (const int n_threads : threads) {
            ThreadPool pool(n_threads);
            std::vector<double> read[kPolicies], product[kPolicies], ratio[kPolicies];
            ReadBandwidthProbe probes[kPolicies] = {
                ReadBandwidthProbe(pool, probe_bytes_beyond_caches(llc), far_prefetch_bytes(Ahead::kL2)),
                ReadBandwidthProbe(pool, probe_bytes_beyond_caches(llc), far_prefetch_bytes(Ahead::kL2AndL1),
                                   kL1PolicyNearBytes),
                ReadBandwidthProbe(pool, probe_bytes_beyond_caches(llc), 0, 0)};
            for (int round = 0; round < rounds; ++round) {
                for (int p = 0; p < kPolicies; ++p) {
                    set_group_prefetch(policies[p]);
                    const double start = now_seconds();
                    int passes = 0;
                    do {
                        matmul(g.m, {0, g.m.rows, 0, cols}, x, y.data(), g.m.rows, pool);
                        ++passes;
                    } while (now_seconds() - start < kRunSeconds);
                    const double seconds = now_seconds() - start;
                    const double gbs = static_cast<double>(weight_bytes) * passes / seconds / 1e9;
                    const double ceiling = probes[p].sustained(seconds);
                    product[p].push_back(gbs);
                    read[p].push_back(ceiling);
                    ratio[p].push_back(gbs / ceiling);
                }
            }
            for (int p = 0; p < kPolicies; ++p) {
                std::printf("| %s | %d | %s | %.1f | %.1f | %.3f |\n", name.c_str(), n_threads,
                            group_prefetch_name(policies[p]), median(read[p]), median(product[p]), median(ratio[p]));
            }
            std::fflush(stdout);
        }
    }
    set_group_prefetch(default_group_prefetch());
    return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
    try {
        return tessera::run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
