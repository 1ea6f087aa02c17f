// A worker serving one pipeline stage (LEAP, Shard): a contiguous block of
// whole layers. Residual rows arrive from the previous stage (or from the
// root for the first worker stage), run through the stage's layers, and go
// straight on to the next stage; the last stage computes the logits and sends
// them to the root directly, one hop, never back along the chain.
#pragma once

#include "cluster/session/heartbeat.h"
#include "model/slice_forward.h"
#include "net/channel.h"
#include "net/wire_key.h"

#include <functional>
#include <memory>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tessera {

struct StageLinks {
    bool has_prev = false;            // rows come from a previous worker stage (else from the root)
    std::optional<HostPort> next;     // the next stage's address (none: this is the last stage)
    std::string fingerprint;          // the model's, checked between stages
    const WireKey* key = nullptr;     // the cluster's key (null: plain frames)
    int root_silence_ms = 0;          // the session ends after this long without a frame from the root (0: never)
    SessionPulse* pulse = nullptr;    // told when the root is heard and the rows computed (the status view)
};

// The previous stage, connected to this worker's port, authenticated, and
// its stage-hello message read (also a tensor-parallel mesh peer, whose first
// message is a mesh-hello: `type` tells which).
struct PreviousStage {
    std::unique_ptr<FrameChannel> channel;
    nlohmann::json hello;
    uint16_t type = 0;
};
using AcceptPrevious = std::function<PreviousStage(int timeout_ms)>;

// Runs until the root shuts the session down; throws an Error naming the
// peer on any failure. `accept_previous` waits for the previous stage.
// `block` runs the stage's layers (this process alone, or a tensor-parallel
// group it leads); `front` is the leader's own slice, which computes the
// logits on the last stage.
void serve_stage(FrameChannel& control, const AcceptPrevious& accept_previous, LayerBlock& block, SliceRunner& front,
                 const StageLinks& links, const ChannelLimits& limits,
                 const std::function<void(const std::string&)>& log);

}  // namespace tessera
