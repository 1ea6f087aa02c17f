// `tessera worker`: serves a root's session in whatever role the plan gives
// it: a tensor-parallel rank's slice, a pipeline stage's layers, or the whole
// model for sequence-parallel prefill (cluster/session/messages.h).
//
// The worker maps its model file and, once the root has assigned a slice,
// touches only that slice's rows and columns and keeps only its own KV heads.
// Started without a model file, it receives its slice from the root once (a
// slice file, checked against the model's fingerprint and a checksum) and
// keeps it in its cache directory for the next run.
// It accepts any number of connections: each must prove the cluster's key
// (net/handshake.h) within its deadline; one root is served at a time and
// other roots are told the worker is busy; the previous stage of a pipeline
// session is handed to that session. When a session ends (the root shuts it
// down, hangs up or fails) it serves the next root, unless told to serve once.
// Nothing a peer sends ends the process: every failure ends that connection.
#pragma once

#include "cluster/session/heartbeat.h"
#include "model/slice_forward.h"
#include "net/channel.h"
#include "net/tcp.h"
#include "net/wire_key.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

namespace tessera {

struct WorkerOptions {
    HostPort listen;
    std::string model_path;  // empty: receive slices from roots and cache them
    std::string cache_dir;   // where received slices are kept
    uint64_t cache_max_bytes = 32ull << 30;  // the cache's total size; older slices are evicted first
    std::shared_ptr<const WireKey> key;      // null: plain frames (loopback, or --insecure)
    bool insecure = false;                   // plain frames on a non-loopback address: warn every session
    int n_threads = 1;
    bool once = false;  // exit after the first session (workers of --local)
    bool private_weights = true;  // false: compute from the mapped file (--mmap)
    // A session whose root sends nothing (roots beat every second, busy or
    // idle) for this long is dropped, so a root that lost power or its cable
    // frees the worker; 0: never (--root-silence-ms).
    int root_silence_ms = kDefaultRootSilenceMs;
    // Answer keyed discovery probes on this UDP port (--advertise); needs a key.
    bool advertise = false;
    uint16_t discovery_port = 9999;
    ChannelLimits limits;
    // Codebooks of the model's K/V rows (tessera vq-fit), for a root whose
    // sequence-parallel prefill sends rows compressed; empty: none.
    std::string codebooks_path;
    // Called with the bound port once listening (port 0 picks a free one).
    std::function<void(uint16_t)> on_listening;
    // Where this worker computes when not on its CPU (a GPU: --device
    // vulkan[:N]): builds a pipeline stage's slice there, or a
    // tensor-parallel rank's share; null: the CPU. (A stage led as a
    // tensor-parallel group and sequence-parallel chunks stay on the CPU.)
    std::function<std::unique_ptr<SliceRunner>(const LlamaModel&, const Slice&, const ForwardConfig&)> stage_device;
    std::function<std::unique_ptr<RankRunner>(const LlamaModel&, const Slice&, const ForwardConfig&)> rank_device;
    std::string device_name;  // the device, for logs, refusals and the hello
    // The device's memory (reported as the worker's free memory: what its
    // share must fit) and speed (probe_seconds, as the CPU's is measured).
    uint64_t device_memory = 0;
    std::function<double(const LlamaModel&)> device_probe;
    // Called once listening with a function that returns the worker's status
    // (worker_status.h; callable from any thread while run_worker runs):
    // the CLI serves it as Prometheus metrics (--metrics-port).
    std::function<void(std::function<nlohmann::json()>)> publish_status;
    // Log lines (session start/end, errors); stderr in the CLI.
    std::function<void(const std::string&)> log;
};

void run_worker(const WorkerOptions& options);

}  // namespace tessera
