// The plan a user asks for on the command line (run, chat, serve, bench,
// perplexity, plan): workers, stages or a cluster file, local processes,
// shares, exact or fast, the wire's key and timeouts, --auto, and
// sequence-parallel prefill. Plain data: engine/decoder_setup.h builds the
// decoder it names, cluster/planner/auto_plan.h rewrites it for --auto.
#pragma once

#include <climits>
#include <string>
#include <vector>

namespace tessera {

struct ParallelOptions {
    std::string workers;          // "HOST:PORT,HOST:PORT,..."
    std::string stages;           // pipeline / hybrid: "root,H:P/H:P,H:P" (cluster_spec.h)
    std::string cluster;          // or a cluster file (TOML)
    std::vector<int> stage_layers;  // layers per stage, root first; empty: sized by speed
    int local = 1;                // processes on this machine (1: no workers)
    std::vector<double> weights;  // per rank, root first; empty: measured
    bool fast = false;
    bool exact = false;  // only to refuse --fast together with --exact
    int timeout_ms = 5000;
    bool tcp_only = false;  // same-host ranks talk over TCP, not shared memory
    bool mmap = false;      // compute from the mapped file, not a private copy of the weights
    bool no_offload = false;
    // Where this process computes its share: "cpu", or "vulkan[:N]" (device N
    // of `tessera devices`, 0 when not given).
    std::string device = "cpu";
    // With a GPU device: the first N layers there, the rest on the CPU.
    int gpu_layers = INT_MAX;  // refuse a plan whose shares do not fit, rather than stream layers
    std::string key_file;   // --key (else $TESSERA_KEY_FILE): seal every frame; none: plain frames
    int step_timeout_ms = 0;  // drop a worker that beats but sends no result for this long (0: sized from its speed)
    int partial_bands = 1;    // tensor parallel: bands each partial is sent in as the product computes them
    std::string exchange = "auto";  // tensor parallel: "all-to-all", "reduce-scatter" or "auto" (by rank count)
    std::string moe_split = "auto";  // tensor parallel of a mixture of experts: "channels", "experts", "mixed" or "auto" (planner.h)
    std::string spares;       // nodes that may replace a lost one ("H:P,H:P")
    int recover_ms = 30000;   // how long a run tries to recover a lost edge or node (0: not at all)
    bool auto_plan = false;   // --auto: survey --workers and run the fastest plan of them (cluster/planner/auto_plan.h)
    // --discover: the workers are those of the local network that hold this
    // cluster's key and answer within discover_ms (worker_discovery.h);
    // then as --workers with --auto.
    bool discover = false;
    int discover_ms = 2000;
    int discovery_port = 9999;
    // "sp": a long prompt is computed sequence-parallel across --local or
    // --workers, every node holding the whole model (cluster/sequence_parallel/sp_prefill_decoder.h),
    // and generation goes on on the root ("root") or on a tensor-parallel group
    // of the same nodes ("tp", --generate); "plan": the prompt runs on the plan.
    std::string prefill = "plan";
    std::string generate = "root";
    std::string codebooks;  // --prefill sp: rows travel as indices of these codebooks (tessera vq-fit)
    bool sequence_parallel() const { return prefill == "sp"; }

    bool pipeline() const { return !stages.empty() || !cluster.empty(); }
    bool parallel() const { return local > 1 || !workers.empty() || pipeline() || auto_plan || discover; }
    const char* mode() const { return !parallel() ? "single" : fast ? "fast" : "exact"; }
};

}  // namespace tessera
