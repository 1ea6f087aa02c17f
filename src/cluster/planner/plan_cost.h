// The planner's choice from link costs: every way to run one stream of
// tokens on the root and some of the surveyed workers (one node, tensor
// parallel, pipeline, or a tensor-parallel first stage with pipeline stages
// after it), each with its predicted time per token, and whether every node
// it uses has the memory for its slice.
//
// The prediction, per token (decode, one sequence):
//   compute: each node reads its slice's weights at the rate its speed probe
//            measured (probe_seconds per probe_bytes), or, streaming layers
//            it cannot hold, at least those at its disk's read rate; a
//            tensor-parallel group waits for its slowest rank, a pipeline
//            adds its stages.
//   a tensor-parallel group of n ranks, per layer and part (2 per layer):
//            o + rtt/2 + (n-1) * P / rate  (each rank sends its partial of P
//            bytes to every other), or with exact partials the cheapest of
//            that, the reduce-scatter 2o + rtt + 2 (n-1)/n P / rate, and the
//            reduce-scatter in bands (banded_reduce_scatter_seconds); plus,
//            per token, the residual rows to every worker and the split
//            output head's gather (o + rtt + bytes);
//   a pipeline: per hop o + rtt/2 + the activation rows / rate, and the last
//            stage's logits back to the root.
// rtt and rate are the worst of the group's measured links to the root (a
// link between two workers is taken to cost what their links to the root
// cost); o is the software cost of one exchange.
#pragma once

#include "cluster/planner/link_probe.h"
#include "cluster/session/messages.h"
#include "attn/kv_cache.h"
#include "model/llama_model.h"
#include "model/slice.h"
#include "ops/quant_type.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera {

struct NodeFacts {
    std::string name;  // "root" or HOST:PORT
    double probe_seconds = 0.0;
    uint64_t free_memory = 0;
    LinkCost link;           // to the root (the root's own: zero)
    std::string cpu_target;  // the SIMD target its kernels run on
    double disk_read_bps = 0.0;  // its disk's sequential reads (0: not measured)
    std::string device;          // the GPU its share runs on ("": its CPU)
};

enum class PlanKind { Single, TensorParallel, Pipeline, Hybrid };

struct PlanOption {
    PlanKind kind = PlanKind::Single;
    // Indices into the nodes, per stage; the first stage starts with the
    // root (0). A stage of several nodes is a tensor-parallel group.
    std::vector<std::vector<size_t>> stages;
    std::vector<int> stage_layers;
    // A tensor-parallel plan's exchange: the cheaper one over the measured
    // links (reduce-scatter only with exact partials). Groups inside a
    // pipeline run auto_topology's choice, and are costed with it.
    PartialTopology exchange = PartialTopology::kAllToAll;
    int partial_bands = 1;  // n_ranks where the reduce-scatter in bands is the cheapest
    // A mixture of experts: how each stage's group splits its experts (the
    // balanced split where every host has the memory for it), in stage
    // order; none for a stage of one node or a dense model.
    std::vector<std::optional<MoeSplit>> moe_splits;
    double compute_seconds = 0.0;
    double network_seconds = 0.0;
    bool fits = true;
    std::string why_not;  // the first node short of memory
    // Nodes whose share does not fit their memory and streams layers from
    // disk: "A streams 310 MiB/token at 1200 MB/s" (with offload).
    std::string streaming;

    double seconds() const { return compute_seconds + network_seconds; }
};

// Software cost of one exchange of partials (this VM, loopback: 29-37 µs
// measured per sync, rounded up for the work around it).
constexpr double kSyncSoftwareSeconds = 40e-6;

// One sync of a reduce-scatter in bands on n ranks (PartialExchange): each
// rank computes its last product in n bands of band_seconds, sends each
// segment (x = P / (n rate)) to its owner as it is done, its own last; the
// owners' totals go out once every share has arrived:
//   shares in = max((n-1) band + x, band + (n-1) x) + rtt/2  (from the product's start)
//   exposed   = max(0, shares in - n band) + (n-1) x + rtt/2 + 2o + (n-1) b
// The frames are the whole reduce-scatter's, only sent sooner; b is what a
// band adds: one more dispatch of the product over the thread pool.
constexpr double kBandDispatchSeconds = 3e-6;
double banded_reduce_scatter_seconds(int n, double band_seconds, double partial_bytes, const LinkCost& link);

// nodes[0] is the root. Options come in order of the nodes they use (fewest
// first); workers join in order of their round trip, best first.
// With offload, a node short of memory for its share may stream layers
// from disk (model/streamed_layers.h): it fits if it has the floor, and its
// time per token is at least its streamed bytes at its disk's read speed
// (the reads overlap the other layers' compute: the slower of the two).
std::vector<PlanOption> plan_options(const LlamaModel& model, std::span<const NodeFacts> nodes, bool fast, int n_ctx,
                                     KvCacheTypes kv_types, bool offload = true);

// The fastest option that fits (the first of equal ones: fewer nodes).
// Throws a PlanRefused when none fits.
const PlanOption& best_option(std::span<const PlanOption> options);

// "one node", "tensor parallel: root, A", "pipeline: root / A", "hybrid: root, A / B".
std::string describe_option(const PlanOption& option, std::span<const NodeFacts> nodes);

}  // namespace tessera
