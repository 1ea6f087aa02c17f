// A worker serving sequence-parallel prefill (Astra, exact exchange): it
// holds the whole model, and for each prompt the root sends it a chunk
// (kSpChunk) and, layer by layer, the K/V rows of every position before the
// chunk (kSpRows, ascending). The node runs its chunk one layer at a time,
// each layer once the rows before the chunk are in, on the batch grid a
// single node uses (so every position gets a single node's bits), and sends
// its own rows of each layer back to the root batch by batch; the node
// holding the prompt's end also sends the logits of its last row (kLogits).
#pragma once

#include "cluster/session/heartbeat.h"
#include "cluster/session/session_messages.h"
#include "model/kv_codebooks.h"
#include "model/slice_forward.h"
#include "net/channel.h"

#include <functional>
#include <optional>
#include <string>

namespace tessera {

// Sends kReady, then serves chunks until the root shuts the session down
// (nullopt), or hands generation to a tensor-parallel group or a pipeline of
// the same nodes (a kAssign of a rank or a stage with handoff_positions):
// then the rows of the prompt
// this node's cache lacks arrive first (kSpRows from handoff_from on, every
// layer), and the assign is returned with the cache holding the whole
// prompt. Throws an Error naming the root on any failure. `books`: rows
// travel as codebook indices (cluster/sequence_parallel/sp_rows.h); null: exactly.
// A root silent for root_silence_ms (0: never) ends the session; `pulse`
// (optional) is told when the root is heard and the rows computed.
std::optional<AssignMessage> serve_prompt_chunks(FrameChannel& control, SliceForward& forward,
                                                const KvCodebooks* books, int root_silence_ms, SessionPulse* pulse,
                                                const std::function<void(const std::string&)>& log);

}  // namespace tessera
