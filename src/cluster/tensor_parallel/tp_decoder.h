// The root of a tensor-parallel group (rank 0): a Decoder whose layers run
// on every rank at once. The root sends each batch's residual rows to every
// worker once; from then on every rank keeps the residual and runs the same
// layer loop (tp_layers.h), the ranks exchanging their partials directly,
// one hop per sync point (partial_exchange.h). After the last layer the root
// gathers the logits of the output head's rows.
//
// --exact (default): exact partials (fixed-point unit sums as packed
// integers) whose sum is exactly a single node's (ops/fixed_sum.h): the same
// logits bit for bit. --fast: Q8_0 partials, about a quarter of the bytes, at
// a quality cost the perplexity tool measures.
#pragma once

#include "cluster/session/head_candidates.h"
#include "cluster/session/heartbeat.h"
#include "cluster/session/adopted_workers.h"
#include "cluster/planner/planner.h"
#include "cluster/tensor_parallel/partial_exchange.h"
#include "cluster/session/session_messages.h"
#include "cluster/tensor_parallel/tp_layers.h"
#include "cluster/session/messages.h"
#include "model/decoder.h"
#include "model/layer_block.h"
#include "model/seq_batches.h"
#include "model/slice_forward.h"
#include "net/channel.h"
#include "net/wire_key.h"
#include "util/thread_pool.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct TpConfig {
    std::vector<HostPort> workers;  // ranks 1..N-1
    std::vector<double> weights;    // per rank, root first; empty: measured speeds
    bool fast = false;
    ForwardConfig forward;
    int n_threads = 1;
    ChannelLimits limits;
    int connect_timeout_ms = 5000;
    // The cluster's key (null: plain frames, for workers without one).
    std::shared_ptr<const WireKey> key;
    // A worker that sends heartbeats but no result for this long is dropped
    // (0: sized from the worker's measured speed and the batch).
    int step_timeout_ms = 0;
    // How the ranks sum their partials (partial_exchange.h); none: chosen by
    // auto_topology (reduce-scatter for exact partials on 4 ranks or more).
    std::optional<PartialTopology> topology;
    int partial_bands = 1;  // bands each partial is sent in, as the product computes them (PartialExchange::set_bands)
    // How a mixture of experts' FFN is split (cluster/planner/planner.h);
    // none: choose_moe_split_within_memory for the ranks' weights and memory.
    std::optional<MoeSplit> moe_split;
    // A worker on this host (loopback address) is offered a shared-memory
    // link for its frames (net/shm_link.h); false keeps every rank on TCP.
    bool shared_memory = true;
    // A group that is one stage of a hybrid plan runs only the layers
    // [layer_begin, layer_end) (layer_end 0: every layer); its root embeds
    // tokens when `first` and computes logits when `last`.
    int layer_begin = 0;
    int layer_end = 0;
    bool first = true;
    bool last = true;
    // Where the root's own rank computes when not on its CPU (a GPU:
    // --device vulkan); null: the CPU.
    std::function<std::unique_ptr<RankRunner>(const LlamaModel&, const Slice&, const ForwardConfig&)> root_device;
    std::string root_device_name;  // it, for the plan's printout
    // A group that is the whole model splits the output head's rows across
    // its ranks too (the logits are gathered on the root). Off for a group a
    // pipeline drives through its root's own head.
    bool shard_vocab = true;
};

struct TpRankInfo {
    std::string address;  // "root" for rank 0
    std::string device;   // the GPU the rank computes on ("": its CPU)
    Slice slice;
    double weight = 1.0;
    double probe_seconds = 0.0;
    uint64_t footprint_bytes = 0;
    uint64_t free_memory = 0;
    // Bytes of its layers the rank reads from disk every token,
    // where its memory cannot hold them all (0: none; planned, an estimate).
    uint64_t streamed_bytes = 0;
    bool shared_memory = false;  // frames travel through a shared-memory link
    bool sealed = false;         // frames are sealed (the worker proved the key)
    double round_trip_ms = 0.0;  // the handshake's first round trip
    double handshake_ms = 0.0;   // the whole key handshake, connect included
    uint64_t bytes_sent = 0, bytes_received = 0;  // payload bytes of steps, to and from this worker
    // Sync steps and their time: the root's own partials (rank 0), or from
    // the start of the sync to this worker's partial arriving (network included).
    uint64_t steps = 0;
    double step_seconds = 0.0;
};

class TensorParallelDecoder : public Decoder, public LayerBlock {
public:
    TensorParallelDecoder(const LlamaModel& model, const TpConfig& config);
    // A group of workers already connected (config.workers: their addresses).
    TensorParallelDecoder(const LlamaModel& model, const TpConfig& config, AdoptedWorkers adopted);
    ~TensorParallelDecoder() override;

    const ModelHParams& hparams() const override { return forward_->hparams(); }
    int n_ctx() const override { return forward_->n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    int n_seq() const override { return forward_->n_seq(); }
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    // Workers holding rows of the head then send only the candidates
    // (head_candidates.h); the root's own rows stay whole.
    void set_logits_need(const LogitsNeed* need) override;

    // The group's layers over residual rows x in place (LayerBlock): a stage
    // of a hybrid plan drives the group this way.
    void forward_layers(float* x, int pos0, int n_tok) override;
    void forward_layers(float* x, std::span<const SeqRun> runs) override;
    // Every rank compacts its own heads (a kShift in order with the steps).
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    // The root's heads and every rank's (each asked with a kMass).
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;
    // The root's own slice: embeds tokens and computes logits when the group
    // is first / last.
    RankRunner& root_forward() { return *forward_; }

    const std::vector<TpRankInfo>& ranks() const { return ranks_; }
    // How the plan split a mixture of experts (kChannels for a dense model).
    MoeSplit moe_split() const { return moe_split_; }

    // Counters since construction, for benchmarks: payload bytes to and from
    // all workers, sync points, and where the root's time went.
    struct Stats {
        uint64_t bytes_sent = 0;
        uint64_t bytes_received = 0;
        uint64_t syncs = 0;
        uint64_t banded_syncs = 0;  // the root's syncs whose partial went out in bands during its product
        double own_seconds = 0.0;   // computing the root's own partials (norms and adds included)
        double wait_seconds = 0.0;  // in the exchange of partials, and waiting for the head's logits
        double attention_wait_seconds = 0.0, ffn_wait_seconds = 0.0;  // of wait_seconds, by sync (TpLayerTimes)
        uint64_t slice_bytes_sent = 0;  // slice files sent to workers without the model
    };
    const Stats& stats() const { return stats_; }

private:
    // The weights' count and the topology against the partials, for n_ranks.
    void check_config(size_t n_ranks) const;
    // Connects to config.workers and checks their hello replies (shared
    // memory segments opened where offered, one entry per worker).
    void connect_workers(const LlamaModel& model, std::vector<std::unique_ptr<ShmLink>>& links);
    // Plans the slices, assigns them and loads the root's own.
    void assign_slices(const LlamaModel& model, std::vector<std::unique_ptr<ShmLink>>& links,
                       const AdoptedWorkers* adopted);
    // A message of the root's own to one worker (the errors name it).
    void send_to(size_t worker, SessionMessage type, std::span<const uint8_t> payload);
    // Receives a worker's next message, which must be of type `want`, into
    // frame_ (heartbeats skipped, a kError thrown as its message, nothing but
    // heartbeats for deadline_ms a stall); returns the worker's name.
    std::string receive_reply(size_t worker, SessionMessage want, int deadline_ms);
    // Receives a worker's logits for the head step `sent` into received_.
    void receive_logits(size_t worker, const StepHeader& sent, uint32_t width);
    // Byte counters of ranks_ and stats_ from the root's messages and the exchange's.
    void update_stats();
    // logits (n_tok rows of n_vocab) of the residual rows x, every rank
    // computing its vocab rows.
    void head(const float* x, int n_tok, float* logits);
    // Sends a worker that has no model file its slice.
    void send_slice(const LlamaModel& model, size_t worker, const Slice& slice);
    // How long a step of n_tok rows may take on a worker before it counts as stalled.
    int step_deadline_ms(int n_tok) const;

    TpConfig config_;
    ThreadPool pool_;
    std::unique_ptr<RankRunner> forward_;
    std::vector<std::unique_ptr<FrameChannel>> channels_;
    // Beats to every worker once the group is set up, busy or idle: a worker
    // drops a root that falls silent (cluster/session/heartbeat.h).
    std::unique_ptr<Heartbeat> beat_;
    std::vector<TpRankInfo> ranks_;
    MoeSplit moe_split_ = MoeSplit::kChannels;
    std::vector<size_t> head_workers_;  // workers holding rows of the output head
    HeldNeed need_;                     // what the caller reads of the logits, as the head workers hold it
    std::vector<float> x_, h_, received_, seq_logits_, last_x_, head_out_;
    SeqBatch batch_;
    std::unique_ptr<PartialExchange> exchange_;
    TpLayerScratch scratch_;
    double row_budget_ms_ = 0.0;
    std::vector<uint64_t> direct_sent_, direct_received_;  // per rank: the root's own messages
    std::vector<uint8_t> message_;
    Frame frame_;
    Stats stats_;
};

}  // namespace tessera
