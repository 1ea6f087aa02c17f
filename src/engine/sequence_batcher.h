// Continuous batching: several generations at once, each on its own sequence
// (KV cache) of one Decoder, their evals run through the model together.
//
// Each generation runs the ordinary loop (engine/generation.h) in its own
// thread on sequence(s), a Decoder whose eval hands its tokens to the batcher
// and waits for their logits. The batcher's thread collects the evals of every
// running generation (waiting briefly for one that is still sampling), runs
// them as one Decoder::eval_seqs and wakes each with its row. Decoding steps
// cost one row each, so N generations share one pass over the weights.
//
// A prompt joins without stalling the others: while another sequence is
// decoding, a prompt advances by at most prefill_chunk tokens per batch (its
// logits come back when its last chunk is done); alone it goes whole.
#pragma once

#include "engine/decoder_setup.h"
#include "model/decoder.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace tessera {

struct BatcherOptions {
    // Prompt tokens one batch takes beside decoding sequences.
    int prefill_chunk = 128;
    // How long a batch waits for a running generation's next eval (one that
    // is still sampling or streaming its last token) before going without it.
    int grace_us = 2000;
    // Called on the batcher's thread (the decoder's only user) after each
    // batch: the plan's per-node step times for stats().
    std::function<std::vector<NodeStepTime>()> node_times;
};

// What the batcher has run, for /metrics.
struct BatcherStats {
    uint64_t batches = 0;
    uint64_t rows = 0;        // positions evaluated
    uint64_t sequences = 0;   // sum over batches of the sequences in each
    double seconds = 0.0;     // in eval_seqs
    double last_seconds = 0.0;
    std::vector<NodeStepTime> nodes;  // from BatcherOptions::node_times after the last batch
};

class SequenceBatcher {
public:
    // decoder.n_seq() sequences; the batcher is the decoder's only user
    // until it is destroyed.
    SequenceBatcher(Decoder& decoder, BatcherOptions options = {});
    ~SequenceBatcher();
    SequenceBatcher(const SequenceBatcher&) = delete;
    SequenceBatcher& operator=(const SequenceBatcher&) = delete;

    int n_seq() const { return static_cast<int>(seqs_.size()); }
    // The decoder of sequence `seq`: eval, and eval_all (a speculative
    // verification's rows). One generation at a time per sequence.
    Decoder& sequence(int seq);
    // A generation on `seq` begins / ends: while it runs, batches wait up to
    // the grace for its next eval.
    void begin(int seq);
    void end(int seq);

    BatcherStats stats() const;

private:
    class SeqDecoder;
    struct Seq {
        std::unique_ptr<SeqDecoder> decoder;
        bool running = false;    // between begin and end
        bool submitted = false;  // an eval waits for its logits
        std::span<const int32_t> tokens;
        int pos = 0;
        bool all = false;  // every token's logits (eval_all)
        size_t done = 0;   // tokens of the eval already run
        bool ready = false;
        std::exception_ptr error;
        std::vector<float> logits;
        std::optional<LogitsNeed> need;  // what its generation reads of the logits (none: every one)
    };

    const float* submit(int seq, std::span<const int32_t> tokens, int pos, bool all);
    void set_need(int seq, const LogitsNeed* need);
    // What a batch of these sequences reads: the largest top-k and every
    // token any of them names (each row then holds what its own sampler
    // reads, and more); false when one reads every logit.
    bool batch_need(const std::vector<size_t>& seqs, LogitsNeed& need) const;
    void loop();
    bool all_running_submitted() const;

    Decoder& decoder_;
    BatcherOptions options_;
    std::vector<Seq> seqs_;
    mutable std::mutex mutex_;
    std::condition_variable wake_batcher_, wake_seqs_;
    bool stop_ = false;
    BatcherStats stats_;
    std::thread thread_;
};

}  // namespace tessera
