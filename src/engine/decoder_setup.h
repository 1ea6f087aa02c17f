// Builds the Decoder a command runs on: a single process, a tensor-parallel
// root over given workers or over N-1 local worker processes (--local N), or
// the entry of a pipeline or hybrid plan (--stages, --cluster).
// Shared by run, bench and perplexity so every tool can use every mode.
#pragma once

#include "cluster/planner/cluster_spec.h"
#include "cluster/planner/parallel_options.h"
#include "cluster/session/local_cluster.h"
#include "cluster/pipeline/pipeline_decoder.h"
#include "cluster/sequence_parallel/sp_prefill_decoder.h"
#include "cluster/tensor_parallel/tp_decoder.h"
#include "model/decoder.h"
#include "model/llama_model.h"
#include "model/slice_forward.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

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
    const SliceForward* local = nullptr;  // a single node's forward pass on the CPU
    std::string device;                   // the root's GPU, "vulkan:N (NAME)" (empty: its CPU)
};

// The Vulkan device --device names ("vulkan" is 0, "vulkan:N" N), nullopt for
// the CPU; an unknown device, or a Vulkan one in a binary built without the
// backend, is an Error.
std::optional<int> vulkan_device_of(const std::string& device);

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
