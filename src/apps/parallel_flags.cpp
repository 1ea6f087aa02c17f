#include "apps/parallel_flags.h"

#include <cstdio>

namespace tessera {

void add_parallel_flags(CLI::App* cmd, ParallelOptions& o) {
    cmd->add_option("--workers", o.workers, "Tensor parallel: workers HOST:PORT,HOST:PORT,... (tessera worker)");
    cmd->add_option("--local", o.local, "Tensor parallel on this machine: N processes (N-1 workers started here)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_option("--weights", o.weights, "Share of each rank, root first (default: measured speed)")->delimiter(',');
    cmd->add_flag("--fast", o.fast, "Q8_0 activations and F16 partials on the wire (approximate)");
    cmd->add_flag("--exact", o.exact, "F32 on the wire: greedy output equals a single node's (the default)");
    cmd->add_option("--timeout-ms", o.timeout_ms, "Network timeout for connects, reads and writes, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 600000));
}

void print_ranks(const TensorParallelDecoder& decoder) {
    for (size_t r = 0; r < decoder.ranks().size(); ++r) {
        const TpRankInfo& info = decoder.ranks()[r];
        std::fprintf(stderr, "rank %zu %s: %s, weight %.2f, %.1f MiB\n", r, info.address.c_str(),
                     describe_slice(info.slice).c_str(), info.weight, info.footprint_bytes / 1048576.0);
    }
}

}  // namespace tessera
