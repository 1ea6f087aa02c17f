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

#include "dist/tp_messages.h"
#include "model/decoder.h"
#include "model/slice_forward.h"
#include "net/channel.h"
#include "util/thread_pool.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera {

struct PipelineConfig {
    std::vector<HostPort> stages;  // workers holding stages 1..S-1, in order
    std::vector<double> weights;   // per stage, root first; empty: measured speed
    ForwardConfig forward;
    int n_threads = 1;
    int micro_batch = 64;  // prompt positions per micro-batch when there are stages
    ChannelLimits limits;
    int connect_timeout_ms = 5000;
};

struct StageInfo {
    std::string address;  // "root" for stage 0
    Slice slice;
    double weight = 1.0;
    uint64_t footprint_bytes = 0;
};

class PipelineDecoder : public Decoder {
public:
    PipelineDecoder(const LlamaModel& model, const PipelineConfig& config);
    ~PipelineDecoder() override;

    const ModelHParams& hparams() const override { return forward_->hparams(); }
    int n_ctx() const override { return forward_->n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;

    const std::vector<StageInfo>& stages() const { return stages_; }

private:
    // Runs tokens through all stages; the last stage's logits land in out.
    void run(std::span<const int32_t> tokens, int pos, bool all, float* out);
    void receive_logits(float* dst, uint32_t rows);

    PipelineConfig config_;
    ThreadPool pool_;
    std::unique_ptr<SliceForward> forward_;
    std::vector<std::unique_ptr<FrameChannel>> channels_;  // to stages 1..S-1
    std::vector<StageInfo> stages_;
    std::vector<float> x_, logits_, all_logits_, received_;
    std::vector<uint8_t> message_;
    Frame frame_;
};

}  // namespace tessera
