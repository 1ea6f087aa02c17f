// Sequence-parallel prefill (Astra, seed 003), exact exchange: a Decoder on
// the root that holds the whole model, as every worker does. A long prompt
// is cut into one contiguous chunk per node (cluster/sequence_parallel/sp_chunks.h, sized by
// the nodes' weights, on a single node's batch grid); every node runs all
// layers over its own chunk, one layer at a time, attending causally to the
// earlier chunks through their K/V rows, which travel as the caches hold
// them (F16 by default): so every position gets a single node's bits.
//
// The root computes the first chunk, sends each layer's rows to the nodes
// after it, and relays each node's rows to the nodes after that one; it keeps
// every row it sees, so when the prompt is done its own cache holds the
// whole prompt, and the logits of the prompt's last position come from the
// node that computed it. Generation then goes on either on the root alone
// (short prompts, generation steps and verifications run there), or, with
// `group` or `pipeline` set, on a tensor-parallel group or a pipeline of the
// same nodes (in node order): at the first step after the prompt, every node
// becomes a rank or a stage in the same session (kAssign with
// handoff_positions), keeping its heads' or layers' rows of the prompt from
// the cache it prefilled after the root has sent it the rows that cache lacks
// (those of later chunks: exact, or rebuilt from codebook indices), and
// releasing the whole model for its slice (cluster/sequence_parallel/kv_handoff.h). From then
// on every call runs on that plan.
#pragma once

#include "cluster/session/heartbeat.h"
#include "cluster/sequence_parallel/sp_chunks.h"
#include "cluster/pipeline/pipeline_decoder.h"
#include "cluster/session/session_messages.h"
#include "cluster/sequence_parallel/sp_rows.h"
#include "cluster/tensor_parallel/tp_decoder.h"
#include "model/decoder.h"
#include "model/local_decoder.h"
#include "net/channel.h"
#include "net/tcp.h"
#include "net/wire_key.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct SpPrefillConfig {
    std::vector<HostPort> workers;
    std::vector<double> weights;  // per node, root first; empty: equal
    ForwardConfig forward;
    int n_threads = 1;
    ChannelLimits limits;
    int connect_timeout_ms = 5000;
    std::shared_ptr<const WireKey> key;  // the cluster's key (null: plain frames)
    // Rows travel as indices of these codebooks (the compressed exchange;
    // every worker must hold the same, worker --codebooks); null: exactly.
    std::shared_ptr<const KvCodebooks> codebooks;
    // A node that sends heartbeats but no rows for this long is dropped (a
    // silent one after limits.io_timeout_ms).
    int step_timeout_ms = 300000;
    // What generates after the first prompt: a tensor-parallel group of
    // these nodes, or a pipeline of them in node order (at most one set;
    // neither: the root alone). Their workers, forward and key are these.
    std::optional<TpConfig> group;
    std::optional<PipelineConfig> pipeline;
};

// What handing generation to the group cost: the rows the root sent the
// nodes, the time from the first step's call to the group being ready.
struct SpHandoffInfo {
    int positions = 0;
    uint64_t bytes_sent = 0;
    double seconds = 0.0;
};

struct SpNodeInfo {
    std::string address;  // "root" for the root
    double weight = 1.0;
    double round_trip_ms = 0.0;  // the handshake's first round trip (workers)
    uint64_t bytes_sent = 0, bytes_received = 0;  // payload bytes the root sent the node and received from it
    PromptChunk last_chunk;  // of the last prompt run across the nodes
};

class SpPrefillDecoder : public Decoder {
public:
    SpPrefillDecoder(const LlamaModel& model, const SpPrefillConfig& config);
    ~SpPrefillDecoder() override;

    const ModelHParams& hparams() const override { return hparams_; }
    int n_ctx() const override { return n_ctx_; }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    int n_seq() const override { return 1; }
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;
    // Passed on to the plan generation is handed to.
    void set_logits_need(const LogitsNeed* need) override;

    // Whether generation goes to a group or a pipeline after the prompt.
    bool hands_off() const { return config_.group.has_value() || config_.pipeline.has_value(); }
    bool hands_to_pipeline() const { return config_.pipeline.has_value(); }
    // What generation was handed to (both null: not yet, or the root alone).
    const TensorParallelDecoder* group() const { return group_.get(); }
    const PipelineDecoder* pipeline() const { return pipeline_.get(); }
    const SpHandoffInfo& handoff() const { return handoff_; }

    const std::vector<SpNodeInfo>& nodes() const { return nodes_; }
    // Prompts that ran across the nodes.
    int prompts() const { return prompts_; }
    // Whether rows travel as codebook indices: the root's cache then holds
    // the other nodes' rows as rebuilt from them, not as computed.
    bool compressed() const { return config_.codebooks != nullptr; }
    // "exact K/V rows, 1024 bytes a position and layer" or "codebook indices,
    // 20 bits a position and layer (1 group, 1024 codes): ... rebuilt".
    std::string describe_exchange() const;

private:
    // Where a call that does not run across the nodes goes: the root, or the
    // group (handed over first when `pos` > 0 is a step after a prompt).
    Decoder& generator(int pos);
    // Every node becomes a rank or a stage, keeping positions [0, positions).
    void hand_off(int positions);
    // The root alone overwrote positions from `pos` on: the nodes' caches
    // hold at most the positions before.
    void root_alone_from(int pos);
    // The root's own chunk, layer by layer, its rows sent on after each.
    void run_first_chunk(std::span<const int32_t> tokens, const PromptChunk& chunk);
    // One layer's rows of positions [pos0, pos0 + n) from the root's cache to
    // every node whose chunk starts after them, in batches.
    void send_rows(int layer, int pos0, int n, size_t after_node);
    // Handles the frames the nodes have sent within timeout_ms (0: only what
    // is there); false when none came.
    bool service(int timeout_ms);
    void handle(size_t node, const Frame& frame);
    bool done() const;
    // The nodes whose rows or logits are still due, by name.
    std::string awaited() const;

    SpPrefillConfig config_;
    const LlamaModel& model_;
    ModelHParams hparams_;
    int n_ctx_ = 0;
    uint64_t row_bytes_ = 0;  // exact K/V rows of a position and layer
    // The root's whole model and cache, and the group that replaces them.
    std::unique_ptr<LocalDecoder> local_;
    std::unique_ptr<SpRowCodec> codec_;
    std::unique_ptr<TensorParallelDecoder> group_;
    std::unique_ptr<PipelineDecoder> pipeline_;
    Decoder* handed_ = nullptr;  // group_ or pipeline_ once handed over
    std::optional<LogitsNeed> need_;  // the caller's, for the plan handed to (none: every logit)
    SpHandoffInfo handoff_;
    std::vector<SpNodeInfo> nodes_;
    std::vector<HelloReply> hellos_;  // per worker
    // Per node: its cache holds positions [0, held_[i]) as a single node would.
    std::vector<int> held_;
    std::vector<std::unique_ptr<FrameChannel>> channels_;  // to nodes 1..N-1
    // Beats to every node while this decoder holds them, busy or idle: a node
    // drops a root that falls silent (cluster/session/heartbeat.h).
    std::unique_ptr<Heartbeat> beat_;
    std::vector<PromptChunk> chunks_;        // this prompt's, per node
    std::vector<std::vector<int>> received_;  // [node][layer]: rows of its chunk in so far
    bool have_logits_ = false;
    uint64_t progress_ = 0;  // rows and logits received (not heartbeats)
    size_t logits_node_ = 0;
    int prompts_ = 0;
    std::vector<float> x_, logits_;
    std::vector<uint8_t> message_;
    Frame frame_;
};

}  // namespace tessera
