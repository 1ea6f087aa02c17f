// Workers a sequence-parallel root already holds (connected, authenticated,
// past their hello), handed to the plan that generates after the prompt it
// prefilled: the ranks of a tensor-parallel group or the stages of a pipeline
// (cluster/sequence_parallel/kv_handoff.h). Each assign carries handoff_positions and
// handoff_from[worker]; after_assign(worker, channel, slice) sends what must
// follow it (the rows of the slice's layers that worker's cache lacks) before
// the root waits for its kReady.
#pragma once

#include "cluster/session/session_messages.h"
#include "model/slice.h"
#include "net/channel.h"
#include "net/tcp.h"

#include <functional>
#include <memory>
#include <vector>

namespace tessera {

struct AdoptedWorkers {
    std::vector<std::unique_ptr<FrameChannel>> channels;  // in plan order (ranks or stages 1..N-1)
    std::vector<HelloReply> hellos;
    std::vector<HostPort> addresses;  // as they listen (mesh peers and previous stages connect to them)
    std::vector<double> round_trip_ms;
    int handoff_positions = 0;
    std::vector<int> handoff_from;
    std::function<void(size_t worker, FrameChannel& channel, const Slice& slice)> after_assign;

    // An internal error unless every list has one entry per channel.
    void check() const;
};

}  // namespace tessera
