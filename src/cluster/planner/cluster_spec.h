// The plan a person writes: which nodes run which stages. Given on the
// command line (--stages) or in a cluster file (TOML) that a person can read
// and write:
//
//   # two stages; the first is the root plus one tensor-parallel worker
//   [[stage]]
//   nodes = ["root", "10.0.0.2:9000"]
//   layers = 11            # optional: layers of this stage (all or none)
//   weights = [2, 1]       # optional: shares inside the group (default: measured)
//
//   [[stage]]
//   nodes = ["10.0.0.3:9000"]
//   weight = 1.5           # optional: the stage's share of layers (default: measured)
//
// On the command line the same plan reads "root,10.0.0.2:9000/10.0.0.3:9000":
// stages separated by '/', the nodes of a stage by ','. The first node of a
// stage leads it; "root" (this process) leads the first stage and no other.
#pragma once

#include "net/tcp.h"

#include <string>
#include <vector>

namespace tessera {

struct ClusterStage {
    std::vector<HostPort> nodes;  // the leader first; stage 0's leader (the root) is not listed
    std::vector<double> weights;  // tensor-parallel shares, leader first; empty: measured
    int layers = 0;               // 0: sized by the planner
    double weight = 0.0;          // share of the layers; 0: measured
};

struct ClusterSpec {
    std::vector<ClusterStage> stages;

    // Every node but the root, in stage order.
    size_t n_workers() const;
    // True when the plan is plain tensor parallel: one stage.
    bool tensor_parallel_only() const { return stages.size() == 1; }
};

// Parses "root,H:P/H:P,H:P"; throws an Error naming what is wrong.
ClusterSpec parse_stages_option(const std::string& text);

// The --stages string of a plan's nodes (its layers and weights left out).
std::string format_stages_option(const ClusterSpec& spec);

// Reads a cluster file (see above); throws an Error naming the file, the line
// and what is wrong.
ClusterSpec load_cluster_file(const std::string& path);
// The same for a cluster file's text (`path` names it in errors).
ClusterSpec parse_cluster_toml(const std::string& text, const std::string& path);

}  // namespace tessera
