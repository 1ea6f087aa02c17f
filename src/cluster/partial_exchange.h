// The all-reduce of a tensor-parallel group: every rank keeps the residual
// stream, and after each attention or FFN partial the ranks send their
// partials straight to each other, one hop, so each rank adds the same sum
// to its own copy of the residual (no root broadcast, no gather). Issue 22's
// "one hop per sync".
//
// Exact (--exact): partials are fixed-point unit sums (ops/fixed_sum.h),
// sent as packed integers (fixed_rows.h); their sum does not depend on the
// order, so every rank's sum is the single node's, bit for bit.
// Fast (--fast): each rank's partial is rounded through Q8_0, its own too,
// and every rank adds the ranks' rounded partials in rank order: the same
// float sum on every rank, so the ranks' residuals never drift apart.
//
// Rank r sends to r+1, r+2, ... and receives from r-1, r-2, ... (mod N):
// its k-th send is the k-th receive of the rank it goes to, so the exchange
// cannot deadlock. Frames small enough to sit in the peer's socket buffers
// are sent inline; larger ones (prompt batches) from a helper thread while
// the caller receives.
#pragma once

#include "cluster/tp_messages.h"
#include "net/channel.h"

#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// What the owners of an exchange's TCP channels ask for as socket buffers.
constexpr int kMeshSocketBufferBytes = 256 << 10;

struct ExchangePeer {
    FrameChannel* channel = nullptr;  // null for this rank
    std::string name;                 // in errors: "worker ADDR (rank r)", "the root"
    std::mutex* send_mutex = nullptr; // held around sends when a heartbeat shares the channel
};

class PartialExchange {
public:
    // peers[r] for every rank r of the group, this rank's entry with no channel.
    PartialExchange(int rank, std::vector<ExchangePeer> peers, bool exact);

    int rank() const { return rank_; }
    int n_ranks() const { return static_cast<int>(peers_.size()); }
    bool exact() const { return exact_; }

    // Every rank calls this with its own partial of the same step (layer
    // tells attention from FFN: 2 * layer + 0/1). Exact: `partial` becomes
    // the sum of every rank's. Fast: `sum` gets the sum of every rank's
    // rounded partial. A peer that sends nothing within deadline_ms, fails or
    // sends a malformed or non-finite partial is named in the Error.
    void exact_sum(uint32_t step, int n_tok, int width, double* partial, int deadline_ms);
    void fast_sum(uint32_t step, int n_tok, int width, const double* partial, float* sum, int deadline_ms);

    struct PeerStats {
        uint64_t bytes_sent = 0, bytes_received = 0;
        uint64_t partials = 0;
        double arrival_seconds = 0.0;  // now_seconds() when its last partial arrived
    };
    const std::vector<PeerStats>& peer_stats() const { return stats_; }
    double wait_seconds() const { return wait_seconds_; }
    uint64_t exchanges() const { return exchanges_; }

private:
    // Encoded own partial in message_; sends it to every peer, receives
    // every peer's (each decoded by `take` as it arrives).
    template <class Take>
    void exchange(const StepHeader& header, int deadline_ms, Take take);
    void send_ring();
    // Receives `from`'s partial; `pending` are the peers due after it (to
    // tell, on a timeout, which one stalled).
    void receive(int from, std::span<const int> pending, const StepHeader& header, int deadline_ms);

    int rank_;
    std::vector<ExchangePeer> peers_;
    std::vector<int> order_;  // the peers in receiving order: rank - 1, rank - 2, ... (mod N)
    bool exact_;
    std::vector<PeerStats> stats_;
    std::vector<uint8_t> message_;
    Frame frame_;
    std::vector<double> exact_rows_;
    std::vector<float> float_rows_, own_rows_;
    std::vector<std::vector<float>> by_rank_;  // fast: each rank's rounded partial
    double wait_seconds_ = 0.0;
    uint64_t exchanges_ = 0;
};

// The rows of a sync a rank may wait for a peer: the io timeout plus, for
// slow peers on long batches, row_budget_ms per row.
int exchange_deadline_ms(int io_timeout_ms, double row_budget_ms, int n_tok);

}  // namespace tessera
