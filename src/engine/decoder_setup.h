// Builds the Decoder a command runs on: a single process, a tensor-parallel
// root over given workers or over N-1 local worker processes (--local N), or
// the entry of a pipeline or hybrid plan (--stages, --cluster).
// Shared by run, bench and perplexity so every tool can use every mode.
#pragma once

#include "cluster/cluster_spec.h"
#include "cluster/local_cluster.h"
#include "cluster/pipeline_decoder.h"
#include "cluster/sp_prefill_decoder.h"
#include "cluster/tp_decoder.h"
#include "model/decoder.h"
#include "model/llama_model.h"
#include "model/slice_forward.h"

#include <memory>
#include <optional>
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
    bool no_offload = false;  // refuse a plan whose shares do not fit, rather than stream layers
    std::string key_file;   // --key (else $TESSERA_KEY_FILE): seal every frame; none: plain frames
    int step_timeout_ms = 0;  // drop a worker that beats but sends no result for this long (0: sized from its speed)
    int partial_bands = 1;    // tensor parallel: bands each partial is sent in as the product computes them
    std::string exchange = "auto";  // tensor parallel: "all-to-all", "reduce-scatter" or "auto" (by rank count)
    std::string spares;       // nodes that may replace a lost one ("H:P,H:P")
    int recover_ms = 30000;   // how long a run tries to recover a lost edge or node (0: not at all)
    bool auto_plan = false;   // --auto: survey --workers and run the fastest plan of them (engine/auto_plan.h)
    // "sp": a long prompt is computed sequence-parallel across --local or
    // --workers, every node holding the whole model (cluster/sp_prefill_decoder.h),
    // and generation goes on on the root ("root") or on a tensor-parallel group
    // of the same nodes ("tp", --generate); "plan": the prompt runs on the plan.
    std::string prefill = "plan";
    std::string generate = "root";
    std::string codebooks;  // --prefill sp: rows travel as indices of these codebooks (tessera vq-fit)
    bool sequence_parallel() const { return prefill == "sp"; }

    bool pipeline() const { return !stages.empty() || !cluster.empty(); }
    bool parallel() const { return local > 1 || !workers.empty() || pipeline() || auto_plan; }
    const char* mode() const { return !parallel() ? "single" : fast ? "fast" : "exact"; }
};

// Threads per process when none are asked for: the cores of this machine,
// shared among the processes of --local.
int default_threads(const ParallelOptions& options);

struct DecoderSetup {
    // Declared first so it is destroyed last: the root says goodbye to its
    // workers before they are reaped.
    std::unique_ptr<LocalWorkers> local_workers;
    std::unique_ptr<Decoder> decoder;
    TensorParallelDecoder* tensor_parallel = nullptr;  // set in tensor-parallel modes
    PipelineDecoder* pipeline = nullptr;                // set in pipeline and hybrid modes
    SpPrefillDecoder* sequence_parallel = nullptr;       // set with --prefill sp
    std::string plan_report;  // --auto: the survey and the plan it chose
    // A single node whose weights do not fit its memory: the bytes of layers
    // it streams from disk every token (0: none).
    uint64_t streamed_bytes = 0;
};

// A node's steps and their time as the root sees them (TpRankInfo::steps,
// StageInfo::steps): for /metrics.
struct NodeStepTime {
    std::string node;  // address, "root" for the root
    std::string role;  // "rank N" or "stage N"
    uint64_t steps = 0;
    double seconds = 0.0;
};

// Every node of a distributed plan that has counted steps; none for a single node.
std::vector<NodeStepTime> node_step_times(const DecoderSetup& setup);

// The plan given by --stages or --cluster (and --weights / --stage-layers as
// stage weights and layer counts), or nullopt when there is none.
std::optional<ClusterSpec> cluster_spec_of(const ParallelOptions& options);

// With --auto, surveys the workers first and builds the plan it chooses
// (setup.plan_report says which and why).
DecoderSetup make_decoder(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                          const ParallelOptions& options);

}  // namespace tessera
