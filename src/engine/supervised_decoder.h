// A distributed plan that outlives a lost edge or node (exo's open items:
// re-routing a request whose node disconnects, surviving brief Wi-Fi drops).
//
// It records every eval it is asked for. When one fails on the network (a
// reset, a relay restart, a node that died or stalled), it tears the plan
// down, probes the plan's nodes, and builds the plan again:
//   - every node answers: the same plan (a transient drop), retried with
//     backoff while the old sessions wind down;
//   - a node has refused connections for longer than the grace time: it is
//     gone; a live spare (--spare) takes its place, else the plan is made
//     over the survivors (a stage that loses its only node is dropped and its
//     layers spread over the others); a plan that no longer fits says how
//     many nodes it had and how many bytes are missing.
// The new plan's KV caches are rebuilt by replaying the recorded evals
// exactly as they were made (the same batches at the same positions), then
// the failed eval runs again: no token is lost, and in exact modes the whole
// output equals an uninterrupted run's. --local plans start fresh processes.
#pragma once

#include "engine/decoder_setup.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct RecoveryOptions {
    std::vector<HostPort> spares;  // nodes that may replace a lost one
    int budget_ms = 30000;         // give up recovering after this long (0: never recover)
    int grace_ms = 2000;           // a node refusing connections this long is gone for good
};

// One edge of the plan, root to node, over the whole run (all its plans).
struct EdgeHealth {
    std::string node;     // address
    std::string role;     // "rank N" or "stage N"
    double round_trip_ms = 0;  // the latest handshake's first round trip
    uint64_t bytes_sent = 0, bytes_received = 0;
    int retries = 0;      // plans rebuilt while this node was in the plan
    bool lost = false;    // dropped from the plan as gone
};

struct RecoveryStats {
    int recoveries = 0;        // failures recovered from
    int attempts = 0;          // plans built while recovering
    double seconds_lost = 0;   // time spent recovering (teardown, probes, rebuild, replay)
    std::vector<std::string> replaced;  // "A -> B" (spare) or "A -> none" (re-planned over the survivors)
};

class SupervisedDecoder : public Decoder {
public:
    SupervisedDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads, ParallelOptions options,
                      RecoveryOptions recovery, std::function<void(const std::string&)> log);
    ~SupervisedDecoder() override;

    const ModelHParams& hparams() const override { return setup_.decoder->hparams(); }
    int n_ctx() const override { return setup_.decoder->n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override;
    const float* eval_all(std::span<const int32_t> tokens, int pos) override;
    int n_seq() const override { return setup_.decoder->n_seq(); }
    const float* eval_seqs(std::span<const SeqEval> evals) override;
    // Recorded with the evals: a rebuilt plan replays it in its place.
    void compact_context(int seq, std::span<const int> kept, int n_used) override;
    // Asked of the current plan (a rebuilt one has replayed the same history).
    void add_attention_mass(int seq, int n_used, int64_t* totals) override;
    // Passed on to the current plan, and to a rebuilt one.
    void set_logits_need(const LogitsNeed* need) override;

    // The current plan (it changes when a node is replaced).
    const DecoderSetup& setup() const { return setup_; }
    std::vector<EdgeHealth> edge_health() const;
    const RecoveryStats& recovery_stats() const { return stats_; }

private:
    // One sequence's share of an eval_seqs call: tokens [begin, begin + n).
    struct SeqPart {
        int seq = 0;
        int pos = 0;
        size_t begin = 0, n = 0;
    };
    struct Call {
        std::vector<int32_t> tokens;
        int pos = 0;
        bool all = false;
        std::vector<SeqPart> parts;  // not empty: an eval_seqs call
        // A compaction instead of an eval: sequence parts[0].seq keeps the
        // positions in `kept` of parts[0].pos.
        bool compact = false;
        std::vector<int> kept;
    };
    const float* run(Call call);
    // Runs a call on the current plan.
    const float* apply(const Call& call);
    void teardown();
    // Rebuilds a working plan after `failure` and replays the history.
    void recover(const std::string& failure);
    void build();
    void replay();
    // Folds the current plan's per-edge counters into health_ (before teardown).
    void collect_health();
    // The plan's worker nodes (not the root, not --local ones).
    std::vector<HostPort> plan_nodes() const;
    // Takes `gone` out of the plan (a spare in its place, if one answers).
    void drop_node(const HostPort& gone);

    const LlamaModel& model_;
    ForwardConfig config_;
    int n_threads_;
    ParallelOptions options_;
    RecoveryOptions recovery_;
    std::function<void(const std::string&)> log_;
    DecoderSetup setup_;
    std::vector<Call> history_;
    std::vector<SeqEval> seq_evals_;  // apply's scratch
    std::vector<EdgeHealth> health_;
    RecoveryStats stats_;
    std::optional<LogitsNeed> need_;  // the caller's (none: every logit)
};

}  // namespace tessera
