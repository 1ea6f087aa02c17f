// A survey of the workers a plan may use, before choosing one: each worker is
// reached as a run would reach it (the key handshake, the hello naming this
// model), reports its speed probe and free memory, has its link timed
// (link_probe.h), and is released with kShutdown before any assign, so it
// serves the run that follows (a worker's --once session is not spent).
#pragma once

#include "cluster/planner/link_probe.h"
#include "model/llama_model.h"
#include "net/channel.h"
#include "net/tcp.h"
#include "net/wire_key.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

struct WorkerFacts {
    HostPort address;
    double probe_seconds = -1.0;  // negative: the worker has no model file to time
    double disk_read_bps = 0.0;   // 0: not measured
    uint64_t free_memory = 0;
    std::string cpu_target;
    std::string device;  // its GPU ("": it computes on its CPU)
    bool sealed = false;
    LinkCost link;
};

// Throws an Error naming the worker that cannot be reached, refuses the
// session, is busy or holds another model.
std::vector<WorkerFacts> survey_workers(const LlamaModel& model, std::span<const HostPort> workers,
                                        const WireKey* key, const ChannelLimits& limits, int connect_timeout_ms);

}  // namespace tessera
