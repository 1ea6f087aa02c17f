// Micro-benchmark of the dot-product kernels, one thread: weight bytes per
// second for the scalar references and the SIMD kernels of the dispatched
// target (or of every compiled target the CPU supports, --all-targets).
//
//   vec_dot    one vec_dot per row of a 2048 x 5632 matrix (a matrix-vector
//              product as single dot products)
//   matvec     the same product as matmul runs it for one token: tiles of
//              16 rows x 1 column
//   tile       256 rows x 512 activation columns in 16 x 64 tiles (matmul's
//              prefill blocking); GB/s counts the weights once per column,
//              i.e. the bandwidth a matrix-vector product would need to match
//   groups     (--groups) the grouped kernels (F16's and BF16's too), as
//              matmul runs a prompt over weights in the group layout
//              (ops/row_groups.h): 256 rows x 512 activation columns, one
//              call per 16-row group and 64 columns; GB/s as in tile, and the
//              multiply-adds per second (integer ones for a block type)
//   gen        (--gen) the grouped kernels (F16's and BF16's too) as a
//              token's product runs them: one activation column, all groups
//              in one call; "hot" over 64 rows that stay in the L2 cache (the
//              kernel's own speed), "cold" over at least 16384 rows and twice
//              the last-level cache, streamed from memory (what generation
//              sees); a kernel whose hot figure is not well above the cold
//              one is bound by its arithmetic, not by the memory
//   peak       (x86-64 with FMA) one thread's float multiply-add peak: 12
//              independent chains of 256-bit fused multiply-adds, the most
//              any float kernel can reach; the float types' tile figure is
//              also shown as GFLOP/s and as a fraction of it (a prompt over
//              F16/BF16 weights is bound by it, not by memory)
//
// Not a test: the figures depend on the machine. Each figure is the best of
// several runs, timed in the thread's CPU time so that other processes on a
// busy machine stretch a run less (they still share the caches). The kernels
// prefetch as TESSERA_PREFETCH says (ops/group_prefetch.h), as tessera does.
#include "ops/cpu_target.h"
#include "ops/dot_kernels.h"
#include "ops/group_prefetch.h"
#include "ops/matvec.h"
#include "ops/quant_traits.h"
#include "ops/quant_type.h"
#include "ops/row_groups.h"
#include "util/cpu_caches.h"
#include "util/rng.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

namespace tessera {
namespace {

constexpr int64_t kRows = 2048;
constexpr int64_t kCols = 5632;
constexpr int64_t kTileRows = 256;
constexpr int kTileColumns = 512;
constexpr int kRowBlock = 16;  // matmul's blocking
// Rows x columns per vec_dot_tile call in the tile figure (--tile R C).
int g_tile_rows = 16;
int g_tile_cols = 64;
bool g_gen = false;  // --gen: one-column products instead of a prompt's

// Rows of random values in `type`, quantized by the scalar reference.
std::vector<uint8_t> random_rows(QuantType type, int64_t rows, int64_t n, uint64_t seed) {
    const QuantTraits& ref = *scalar_traits(type);
    const uint64_t row_bytes = quant_row_bytes(type, n);
    std::vector<uint8_t> out(rows * row_bytes);
    std::vector<float> x(static_cast<size_t>(n));
    Rng rng(seed);
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : x) v = rng.next_normal();
        ref.from_float(x.data(), out.data() + r * row_bytes, n);
    }
    return out;
}

#if defined(__x86_64__) && defined(__GNUC__)
// `iters` rounds of 12 independent 256-bit fused multiply-adds (the chains
// outnumber the FMA latency times its throughput on every x86 core, so the
// units never wait); written in assembly so no compiler reorders or spills it.
__attribute__((target("avx2,fma"))) void fma_chains(int64_t iters) {
    __asm__ volatile(
        "vxorps %%ymm0,%%ymm0,%%ymm0\n vxorps %%ymm1,%%ymm1,%%ymm1\n vxorps %%ymm2,%%ymm2,%%ymm2\n"
        "vxorps %%ymm3,%%ymm3,%%ymm3\n vxorps %%ymm4,%%ymm4,%%ymm4\n vxorps %%ymm5,%%ymm5,%%ymm5\n"
        "vxorps %%ymm6,%%ymm6,%%ymm6\n vxorps %%ymm7,%%ymm7,%%ymm7\n vxorps %%ymm8,%%ymm8,%%ymm8\n"
        "vxorps %%ymm9,%%ymm9,%%ymm9\n vxorps %%ymm10,%%ymm10,%%ymm10\n vxorps %%ymm11,%%ymm11,%%ymm11\n"
        "vxorps %%ymm14,%%ymm14,%%ymm14\n vxorps %%ymm15,%%ymm15,%%ymm15\n"
        "1:\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm0\n vfmadd231ps %%ymm14,%%ymm15,%%ymm1\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm2\n vfmadd231ps %%ymm14,%%ymm15,%%ymm3\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm4\n vfmadd231ps %%ymm14,%%ymm15,%%ymm5\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm6\n vfmadd231ps %%ymm14,%%ymm15,%%ymm7\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm8\n vfmadd231ps %%ymm14,%%ymm15,%%ymm9\n"
        "vfmadd231ps %%ymm14,%%ymm15,%%ymm10\n vfmadd231ps %%ymm14,%%ymm15,%%ymm11\n"
        "dec %0\n jnz 1b\n vzeroupper\n"
        : "+r"(iters)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm14",
          "xmm15", "cc");
}
#endif

double thread_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds of the fastest of several runs (at least 3, and at least `budget`
// seconds in all unless one run alone takes longer than that).
template <typename Body>
double best_seconds(Body body, double budget) {
    double best = 1e30, total = 0;
    for (int run = 0; run < 3 || total < budget; ++run) {
        const double t0 = thread_seconds();
        body();
        const double s = thread_seconds() - t0;
        best = std::min(best, s);
        total += s;
        if (s > budget) break;
    }
    return best;
}

// One thread's float FMA peak in GFLOP/s (0 where not measured: not x86-64,
// or no FMA).
double fma_peak_gflops(double budget) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    constexpr int64_t kIters = 20'000'000;
    const double s = best_seconds([] { fma_chains(kIters); }, budget);
    return static_cast<double>(kIters) * 12 * 8 * 2 * 1e-9 / s;  // 12 FMAs of 8 lanes, 2 flops each
#else
    (void)budget;
    return 0;
#endif
}

struct Figures {
    double vec_dot_gbs, matvec_gbs, tile_gbs;
};

float g_sink = 0;  // keeps results alive

Figures measure(const QuantTraits& t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& x, double budget) {
    const QuantType vdt = t.vec_dot_type;
    const uint64_t w_stride = quant_row_bytes(t.type, kCols);
    const uint64_t x_stride = quant_row_bytes(vdt, kCols);
    std::vector<float> y(static_cast<size_t>(kRows) * kTileColumns);
    Figures f{};

    const double matrix_gb = static_cast<double>(kRows * w_stride) * 1e-9;
    f.vec_dot_gbs = matrix_gb / best_seconds(
                                    [&] {
                                        for (int64_t r = 0; r < kRows; ++r)
                                            y[r] = t.vec_dot(kCols, w.data() + r * w_stride, x.data());
                                        g_sink += y[kRows - 1];
                                    },
                                    budget);
    f.matvec_gbs = matrix_gb / best_seconds(
                                   [&] {
                                       for (int64_t r = 0; r < kRows; r += kRowBlock)
                                           t.vec_dot_tile(kCols, w.data() + r * w_stride, w_stride, kRowBlock,
                                                          x.data(), x_stride, 1, y.data() + r, 1);
                                       g_sink += y[kRows - 1];
                                   },
                                   budget);
    const double tile_gb = static_cast<double>(kTileRows * w_stride) * kTileColumns * 1e-9;
    f.tile_gbs = tile_gb / best_seconds(
                               [&] {
                                   for (int64_t r = 0; r < kTileRows; r += g_tile_rows) {
                                       for (int c = 0; c < kTileColumns; c += g_tile_cols) {
                                           t.vec_dot_tile(kCols, w.data() + r * w_stride, w_stride, g_tile_rows,
                                                          x.data() + c * x_stride, x_stride, g_tile_cols,
                                                          y.data() + c * kTileRows + r, kTileRows);
                                       }
                                   }
                                   g_sink += y[0];
                               },
                               budget);
    return f;
}

// The grouped tile product's weight GB/s (counted once per column, as in
// tile): rows grouped by 16 as a loaded model holds them, activations
// quantized as the forward pass quantizes them.
// `n_rows` rows of kCols values of `type` in the group layout (ops/row_groups.h).
std::vector<uint8_t> grouped(QuantType type, const std::vector<uint8_t>& rows, int64_t n_rows) {
    const uint64_t row_bytes = quant_row_bytes(type, kCols);
    const uint64_t gb = group_bytes(type, kCols);
    std::vector<uint8_t> w(gb * (n_rows / kGroupRows));
    for (int64_t g = 0; g < n_rows / kGroupRows; ++g) {
        group_rows(type, rows.data() + g * kGroupRows * row_bytes, row_bytes, kGroupRows, kCols, w.data() + g * gb);
    }
    return w;
}

double measure_groups(const QuantTraits& t, const std::vector<uint8_t>& rows, double budget) {
    const uint64_t row_bytes = quant_row_bytes(t.type, kCols);
    const uint64_t gb = group_bytes(t.type, kCols);
    const std::vector<uint8_t> w = grouped(t.type, rows, kTileRows);
    std::vector<float> xf(static_cast<size_t>(kTileColumns) * kCols);
    Rng rng(3);
    for (auto& v : xf) v = rng.next_normal();
    QuantizedActivation x;
    x.quantize(xf.data(), kCols, t.vec_dot_type, kTileColumns, kCols);
    const bool sums = t.vec_dot_type == QuantType::Q8_0;
    std::vector<float> y(static_cast<size_t>(kTileRows) * kTileColumns);
    constexpr int kColumns = 64;  // matmul's token block
    const double tile_gb = static_cast<double>(kTileRows * row_bytes) * kTileColumns * 1e-9;
    return tile_gb / best_seconds(
                         [&] {
                             for (int64_t g = 0; g < kTileRows / kGroupRows; ++g) {
                                 for (int c = 0; c < kTileColumns; c += kColumns) {
                                     t.vec_dot_groups(kCols, w.data() + g * gb, gb, 1, x.row(c), x.row_bytes(),
                                                      sums ? x.block_sums(c) : nullptr,
                                                      static_cast<size_t>(x.sums_stride()), kColumns,
                                                      y.data() + static_cast<size_t>(c) * kTileRows + g * kGroupRows,
                                                      kTileRows, 0, 0, false);
                                 }
                             }
                             g_sink += y[0];
                         },
                         budget);
}

// weight_bytes: bytes per weight of a float type (0: a block type, whose
// products are integer, not float multiply-adds).
void print(const char* type, const char* target, const Figures& f, const Figures* scalar, double weight_bytes,
           double peak_gflops) {
    std::printf("%-5s %-10s vec_dot %7.2f GB/s   matvec %7.2f GB/s   tile %8.2f GB/s", type, target, f.vec_dot_gbs,
                f.matvec_gbs, f.tile_gbs);
    if (scalar != nullptr) {
        std::printf("   (x%.1f, x%.1f, x%.1f)", f.vec_dot_gbs / scalar->vec_dot_gbs,
                    f.matvec_gbs / scalar->matvec_gbs, f.tile_gbs / scalar->tile_gbs);
    }
    if (weight_bytes > 0) {
        // Each weight meets each column once: 2 flops (a multiply and an add).
        const double gflops = f.tile_gbs / weight_bytes * 2;
        std::printf("   tile %.1f GFLOP/s", gflops);
        if (peak_gflops > 0) std::printf(" = %.2f of peak", gflops / peak_gflops);
    }
    std::printf("\n");
}

// GB/s of one-column products over `n_rows` rows in the group layout, one
// call over all their groups, as a token's product (one thread's share)
// runs them.
double measure_gen(const QuantTraits& t, int64_t n_rows, double budget) {
    const uint64_t gb = group_bytes(t.type, kCols);
    const int64_t n_groups = n_rows / kGroupRows;
    const std::vector<uint8_t> w = grouped(t.type, random_rows(t.type, n_rows, kCols, 1), n_rows);
    std::vector<float> xf(kCols);
    Rng rng(3);
    for (auto& v : xf) v = rng.next_normal();
    QuantizedActivation x;
    x.quantize(xf.data(), kCols, t.vec_dot_type, 1, kCols);
    const bool sums = t.vec_dot_type == QuantType::Q8_0;
    std::vector<float> y(n_rows);
    const double gbytes = static_cast<double>(w.size()) * 1e-9;
    return gbytes / best_seconds(
                        [&] {
                            t.vec_dot_groups(kCols, w.data(), gb, static_cast<int>(n_groups), x.row(0), x.row_bytes(),
                                             sums ? x.block_sums(0) : nullptr, static_cast<size_t>(x.sums_stride()), 1,
                                             y.data(), 1, 0, 0, false);
                            g_sink += y[0];
                        },
                        budget);
}

// --groups: every block type with a grouped kernel, on the CPU target
// TESSERA_CPU_TARGET names (the best by default), or on each target this CPU
// runs with --all-targets (AVX2 with and without AVX-VNNI among them).
int run_groups(bool all_targets, const std::string& only_type, double budget) {
    int shown = 0;
    std::vector<std::string> targets = cpu_target_names();
    if (!all_targets) {
        limit_cpu_target_from_environment();
        targets = {cpu_target_name()};
    }
    for (uint32_t id = 0; id < 64; ++id) {
        const auto layout = quant_layout(id);
        // Block types and the float types with a group layout.
        if (!layout || (layout->block_size <= 1 && !has_group_layout(layout->type))) continue;
        const QuantType type = layout->type;
        if (!only_type.empty() && only_type != quant_type_name(type)) continue;
        const QuantTraits* ref = scalar_traits(type);
        if (ref == nullptr || ref->vec_dot == nullptr) continue;
        const auto rows = random_rows(type, kTileRows, kCols, 1);
        const double macs = static_cast<double>(kTileRows) * kCols * kTileColumns;
        const double bytes = static_cast<double>(kTileRows) * quant_row_bytes(type, kCols) * kTileColumns;
        for (const std::string& target : targets) {
            limit_cpu_target(target);
            const QuantTraits* t = compute_traits(type);
            if (t == nullptr || t->vec_dot_groups == nullptr) continue;
            ++shown;
            if (g_gen) {
                // Cold: rows beyond the last-level cache (16384 rows of Q5_0 are
                // 22 MiB, inside a 32 MiB L3).
                const uint64_t row_bytes = quant_row_bytes(type, kCols);
                const auto beyond_cache = static_cast<int64_t>(2 * last_level_cache_bytes() / row_bytes);
                const int64_t cold_rows = std::max<int64_t>(16384, (beyond_cache + kGroupRows - 1) / kGroupRows * kGroupRows);
                const double hot = measure_gen(*t, 64, budget), cold = measure_gen(*t, cold_rows, budget);
                std::printf("%-7s %-10s gen  hot %7.2f GB/s   cold %7.2f GB/s\n", quant_type_name(type),
                            target.c_str(), hot, cold);
                continue;
            }
            const double gbs = measure_groups(*t, rows, budget);
            std::printf("%-7s %-10s groups %8.2f GB/s   %6.1f G %s multiply-adds/s\n", quant_type_name(type),
                        target.c_str(), gbs, gbs / bytes * 1e9 * macs * 1e-9,
                        layout->block_size <= 1 ? "float" : "int8");
        }
    }
    if (shown == 0 && !only_type.empty()) {
        std::fprintf(stderr, "kernel_bench: %s has no grouped kernel on this CPU's targets\n", only_type.c_str());
        return 2;
    }
    return g_sink == 12345.0f ? 1 : 0;
}

int run(int argc, char** argv) {
    set_group_prefetch_from_environment();
    bool all_targets = false;
    bool groups = false;
    double budget = 0.5;
    std::string only_type;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--all-targets") {
            all_targets = true;
        } else if (arg == "--quick") {
            budget = 0.05;
        } else if (arg == "--tile" && i + 2 < argc) {
            g_tile_rows = std::atoi(argv[++i]);
            g_tile_cols = std::atoi(argv[++i]);
            if (g_tile_rows < 1 || kTileRows % g_tile_rows != 0 || g_tile_cols < 1 || kTileColumns % g_tile_cols != 0) {
                std::fprintf(stderr, "--tile: rows must divide %lld, columns %d\n", static_cast<long long>(kTileRows),
                             kTileColumns);
                return 2;
            }
        } else if (arg == "--groups") {
            groups = true;
        } else if (arg == "--gen") {
            groups = g_gen = true;
        } else if (arg == "--type" && i + 1 < argc) {
            only_type = argv[++i];
        } else {
            std::fprintf(stderr,
                         "usage: kernel_bench [--all-targets] [--quick] [--groups] [--gen] [--type T] [--tile R C]\n"
                         "  --all-targets  every compiled SIMD target this CPU supports, not just the best\n"
                         "  --quick        fewer runs per figure\n"
                         "  --groups       the grouped kernels of every type (a prompt's products)\n"
                         "  --gen          the grouped kernels for one column (a token's products), hot and cold\n"
                         "  --type T       only this weight type (F32|F16|BF16|Q8_0|Q4_0; with --groups or\n"
                         "                 --gen any type with a grouped kernel)\n"
                         "  --tile R C     R rows x C columns per vec_dot_tile call in the tile figure (16 64)\n");
            return 2;
        }
    }
    if (!only_type.empty()) {
        const auto type = parse_quant_type(only_type);
        if (!type) {
            std::fprintf(stderr, "kernel_bench: unknown --type '%s'\n", only_type.c_str());
            return 2;
        }
        only_type = quant_type_name(*type);  // the spelling the loops compare
    }
    std::vector<int64_t> targets = simd_block_targets();
    if (!all_targets) targets.resize(1);  // the best one comes first
    std::printf("matrix %lld x %lld, tile %lld rows x %d columns in calls of %d x %d, one thread\n",
                static_cast<long long>(kRows), static_cast<long long>(kCols), static_cast<long long>(kTileRows),
                kTileColumns, g_tile_rows, g_tile_cols);
    const double peak = fma_peak_gflops(budget);
    if (peak > 0) {
        std::printf("peak: %.1f GFLOP/s of 256-bit fused multiply-adds, one thread\n", peak);
    } else {
        std::printf("peak: not measured on this CPU (x86-64 with FMA only)\n");
    }
    if (groups) return run_groups(all_targets, only_type, budget);
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0}) {
        if (!only_type.empty() && only_type != quant_type_name(type)) continue;
        const QuantTraits& ref = *scalar_traits(type);
        const auto w = random_rows(type, kRows, kCols, 1);
        const auto x = random_rows(ref.vec_dot_type, kTileColumns, kCols, 2);
        const Figures scalar = measure(ref, w, x, budget);
        const double weight_bytes =
            type == QuantType::F32 ? 4.0 : (type == QuantType::F16 || type == QuantType::BF16) ? 2.0 : 0.0;
        print(quant_type_name(type), "scalar", scalar, nullptr, weight_bytes, peak);
        for (int64_t target : targets) {
            hwy::SetSupportedTargetsForTest(target);
            print(quant_type_name(type), hwy::TargetName(target), measure(*simd_block_traits(type), w, x, budget),
                  &scalar, weight_bytes, peak);
        }
        hwy::SetSupportedTargetsForTest(0);
    }
    return g_sink == 12345.0f ? 1 : 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::run(argc, argv); }
