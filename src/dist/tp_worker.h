// `tessera worker`: serves one slice of a model to a tensor-parallel root.
//
// The worker maps its model file and, once the root has assigned a slice,
// touches only that slice's rows and columns and keeps only its own KV heads.
// Started without a model file, it receives its slice from the root once (a
// slice file, checked against the model's fingerprint and a checksum) and
// keeps it in its cache directory for the next run.
// It serves one root at a time; when a session ends (the root shuts it down,
// hangs up or fails) it waits for the next root, unless told to serve once.
#pragma once

#include "net/channel.h"
#include "net/tcp.h"

#include <functional>
#include <string>

namespace tessera {

struct WorkerOptions {
    HostPort listen;
    std::string model_path;  // empty: receive slices from roots and cache them
    std::string cache_dir;   // where received slices are kept
    int n_threads = 1;
    bool once = false;  // exit after the first session (workers of --local)
    bool private_weights = true;  // false: compute from the mapped file (--mmap)
    ChannelLimits limits;
    // Called with the bound port once listening (port 0 picks a free one).
    std::function<void(uint16_t)> on_listening;
    // Log lines (session start/end, errors); stderr in the CLI.
    std::function<void(const std::string&)> log;
};

void run_tp_worker(const WorkerOptions& options);

}  // namespace tessera
