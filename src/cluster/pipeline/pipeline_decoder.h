// The entry node of a pipeline (LEAP, Shard): a Decoder whose layers are cut
// into contiguous blocks, the first run here (with the embedding), the others
// each on a worker holding only its block. Rows go root -> stage 1 -> ... ->
// last stage, which sends the logits straight back to the root.
//
// A prompt is cut into micro-batches that flow through the stages one after
// another: while stage k works on micro-batch c, stage k-1 already works on
// c + 1, so a long prompt's time to first token falls with more stages.
// Every stage adds its layers' outputs to the residual exactly as a single
// node does, so greedy output equals a single node's.
#pragma once

#include "cluster/session/head_candidates.h"
#include "cluster/session/heartbeat.h"
#include "cluster/session/adopted_workers.h"

#include "cluster/tensor_parallel/tp_decoder.h"
#include "cluster/session/messages.h"
#include "model/decoder.h"
#include "model/seq_batches.h"
#include "model/slice_forward.h"
#include "net/channel.h"
#include "util/thread_pool.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

struct PipelineConfig {
    std::vector<HostPort> stages;  // workers leading stages 1..S-1, in order
    std::vector<double> weights;   // per stage, root first; empty: measured speed
    std::vector<int> layers;       // layers per stage, root first; empty: sized by the weights
    // Hybrid plans: groups[s] are the tensor-parallel workers that join the
    // leader of stage s (the root for stage 0); empty or missing: the leader
    // alone. group_weights[s]: their shares, leader first (empty: measured).
    std::vector<std::vector<HostPort>> groups;
    std::vector<std::vector<double>> group_weights;
    // How the groups split a mixture of experts (none: each group chooses).
    std::optional<MoeSplit> moe_split;
    ForwardConfig forward;
    int n_threads = 1;
    int micro_batch = 64;  // prompt positions per micro-batch when there are stages
    ChannelLimits limits;
    int connect_timeout_ms = 5000;
    std::shared_ptr<const WireKey> key;  // the cluster's key (null: plain frames)
    // A plan whose stages send heartbeats but no logits for this long is
    // dropped (0: sized from the measured speed, the layers and the batch).
    int step_timeout_ms = 0;
    // Where the root's own stage computes when not on its CPU (a GPU:
    // --device vulkan); null: the CPU. root_device runs the stage alone;
    // root_rank_device is the root's rank when its stage leads a
    // tensor-parallel group (a hybrid plan), every layer of its share there.
    std::function<std::unique_ptr<SliceRunner>(const LlamaModel&, const Slice&, const ForwardConfig&)> root_device;
    std::function<std::unique_ptr<RankRunner>(const LlamaModel&, const Slice&, const ForwardConfig&)> root_rank_device;
    std::string root_device_name;  // it, for the plan's printout
};

struct StageInfo {
    std::string address;  // "root" for stage 0
    std::string device;   // the GPU its leader computes on ("": its CPU)
    std::vector<std::string> group;  // tensor-parallel workers joining the leader
    Slice slice;  // the leader's slice
    double weight = 1.0;
    uint64_t footprint_bytes = 0;
    // Bytes of its layers the stage reads from disk every token,
    // where its memory cannot hold them all (0: none; planned, an estimate).
    uint64_t streamed_bytes = 0;
    double round_trip_ms = 0.0;  // the handshake's first round trip (stages 1..)
    uint64_t bytes_sent = 0, bytes_received = 0;  // payload bytes the root sent this stage and received from it
    // Batches and their time: the root's own layers (stage 0), or for the
    // last stage, from the rows leaving the root to the logits arriving
    // (every later stage and link together: the root sees no stage alone).
    uint64_t steps = 0;
    double step_seconds = 0.0;
};

class PipelineDecoder : public Decoder {
public:
    PipelineDecoder(const LlamaModel& model, const PipelineConfig& config);
    // Stages already connected (config.stages: their addresses; no groups).
    PipelineDecoder(const LlamaModel& model, const PipelineConfig& config, AdoptedWorkers adopted);
    ~PipelineDecoder() override;

    const ModelHParams& hparams() const override { return front_->hparams(); }
    int n_ctx() const override { return front_->n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    int n_seq() const override { return front_->n_seq(); }
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    // The last stage then sends only the candidates (head_candidates.h).
    void set_logits_need(const LogitsNeed* need) override;
    // Stage 0's layers here, then a kShift down the pipeline, each stage
    // compacting its own layers before passing it on.
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    // Stage 0's totals, then a kMass down the pipeline, each stage adding its
    // own; the last answers with the sums.
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;

    const std::vector<StageInfo>& stages() const { return stages_; }
    // Stage 0's own slice, on the root's CPU (null when stage 0 is a group or
    // runs on the root's GPU).
    SliceForward* root_forward() { return dynamic_cast<SliceForward*>(forward_.get()); }

private:
    // Connects to config.stages and reads their hello replies.
    std::vector<HelloReply> connect_stages(const LlamaModel& model);
    // Plans the layer blocks, assigns them and loads stage 0's.
    void assign_stages(const LlamaModel& model, const std::vector<HelloReply>& hellos, const AdoptedWorkers* adopted);
    // Runs tokens through all stages; the last stage's logits land in out.
    void run(std::span<const int32_t> tokens, int pos, bool all, float* out);
    void receive_logits(float* dst, uint32_t rows, uint32_t positions);
    // A changed need, to the first stage (passed on to the last).
    void send_need();
    // A message to stage 1 (its bytes counted; an error names the stage).
    void send_to_first_stage(SessionMessage type, std::span<const uint8_t> payload);
    // How long a batch of n_tok positions may take through all stages.
    int step_deadline_ms(uint32_t n_tok) const;

    PipelineConfig config_;
    ThreadPool pool_;
    std::unique_ptr<SliceRunner> forward_;           // stage 0 on the root alone
    std::unique_ptr<TensorParallelDecoder> group_;    // or stage 0 as a tensor-parallel group
    SliceRunner* front_ = nullptr;                    // embeds (and, with one stage, computes logits)
    LayerBlock* block_ = nullptr;                     // runs stage 0's layers
    std::vector<std::unique_ptr<FrameChannel>> channels_;  // to stages 1..S-1
    // Beats to every stage once the pipeline is set up, busy or idle: a
    // stage drops a root that falls silent (cluster/session/heartbeat.h).
    std::unique_ptr<Heartbeat> beat_;
    std::vector<StageInfo> stages_;
    double probe_seconds_ = 0.0;  // the slowest node's probe (one layer's gate and up products, one position)
    std::vector<float> x_, logits_, all_logits_, received_, seq_logits_, last_x_, run_logits_;
    SeqBatch batch_;
    double last_sent_ = 0.0;  // when the last rows left for stage 1
    HeldNeed need_;           // what the caller reads of the logits, as the last stage holds it
    std::vector<int> reply_row_;  // eval_seqs: the last stage's reply row of each batch row
    std::vector<uint8_t> message_;
    Frame frame_;
};

}  // namespace tessera
