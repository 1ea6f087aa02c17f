// The single-process driver: one slice holding the whole model, partials
// added straight into the residual (no synchronization to pay for).
#pragma once

#include "model/decoder.h"
#include "model/seq_batches.h"
#include "model/slice_forward.h"
#include "util/thread_pool.h"

#include <memory>
#include <vector>

namespace tessera {

class LocalDecoder : public Decoder {
public:
    LocalDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads);

    const ModelHParams& hparams() const override { return forward_.hparams(); }
    int n_ctx() const override { return forward_.n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    int n_seq() const override { return forward_.n_seq(); }
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    void compact_context(int seq, std::span<const int> kept, int n_used) override {
        forward_.compact_context(seq, kept, n_used);
    }
    void add_attention_mass(int seq, int n_used, int64_t* totals) override {
        forward_.add_attention_mass(seq, n_used, totals);
    }

    const SliceForward& forward() const { return forward_; }
    SliceForward& forward() { return forward_; }
    // For benchmarks: positions [0, n) of sequence 0 hold random K/V rows.
    void fill_history(int n, uint64_t seed) { forward_.fill_history(0, n, seed); }

private:
    ThreadPool pool_;
    SliceForward forward_;
    WholeModelScratch scratch_;
};

}  // namespace tessera
