// Sequence-parallel prefill (Astra, seed 003), exact exchange: a Decoder on
// the root that holds the whole model, as every worker does. A long prompt
// is cut into one contiguous chunk per node (cluster/sp_chunks.h, sized by
// the nodes' weights, on a single node's batch grid); every node runs all
// layers over its own chunk, one layer at a time, attending causally to the
// earlier chunks through their K/V rows, which travel as the caches hold
// them (F16 by default): so every position gets a single node's bits.
//
// The root computes the first chunk, sends each layer's rows to the nodes
// after it, and relays each node's rows to the nodes after that one; it keeps
// every row it sees, so when the prompt is done its own cache holds the
// whole prompt and generation goes on here, on the root alone, with the
// logits of the prompt's last position from the node that computed it.
// Short prompts (one batch), generation steps, verifications and everything
// else run on the root alone.
#pragma once

#include "cluster/sp_chunks.h"
#include "cluster/sp_rows.h"
#include "model/decoder.h"
#include "model/local_decoder.h"
#include "net/channel.h"
#include "net/tcp.h"
#include "net/wire_key.h"

#include <memory>
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

    const ModelHParams& hparams() const override { return local_.hparams(); }
    int n_ctx() const override { return local_.n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override { return local_.eval_all(tokens, pos); }
    int n_seq() const override { return local_.n_seq(); }
    const float* eval_seqs(std::span<const SeqEval> evals) override { return local_.eval_seqs(evals); }
    void compact_context(int seq, std::span<const int> kept, int n_used) override {
        local_.compact_context(seq, kept, n_used);
    }
    void add_attention_mass(int seq, int n_used, int64_t* totals) override {
        local_.add_attention_mass(seq, n_used, totals);
    }

    const std::vector<SpNodeInfo>& nodes() const { return nodes_; }
    // Prompts that ran across the nodes.
    int prompts() const { return prompts_; }
    // Whether rows travel as codebook indices: the root's cache then holds
    // the other nodes' rows as rebuilt from them, not as computed.
    bool compressed() const { return codec_.compressed(); }
    // "exact K/V rows, 1024 bytes a position and layer" or "codebook indices,
    // 20 bits a position and layer (1 group, 1024 codes): ... rebuilt".
    std::string describe_exchange() const;

private:
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
    LocalDecoder local_;
    SpRowCodec codec_;
    std::vector<SpNodeInfo> nodes_;
    std::vector<std::unique_ptr<FrameChannel>> channels_;  // to nodes 1..N-1
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
