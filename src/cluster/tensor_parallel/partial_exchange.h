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
//
// Reduce-scatter (exact only, PartialTopology::kReduceScatter): the columns
// are cut into one segment per rank; each rank sends segment j of its
// partial to rank j only, adds the segments it receives into its own, then
// sends its segment's total to every peer: two hops, but each link carries
// 2 (N - 1) / N of a partial instead of N - 1 partials, which pays from
// about four ranks (benchmarks/tensor_parallel.sh's projection). The totals
// are the same fixed-point sums, so every rank still holds the single
// node's bits.
//
// Bands (issue 22's overlap): a partial of a few positions may travel as
// several frames, each a band of columns [c0, c1) of every position, sent by
// send_band as soon as the product has computed it, so the transfer of the
// first bands overlaps the product of the last. A receiver takes any tiling
// of [0, width) in ascending order (each frame's pos0 is its band's first
// column); the sum does not depend on it, so exact stays exact and fast
// rounds each Q8_0 block as a whole frame would.
//
// Reduce-scatter with bands: the bands are the segments, and rank r's
// product computes them starting at segment r + 1 and ending with its own
// (first_band), each sent to its owner as soon as it is computed: while a
// rank computes its own segment, the scatter phase is already on the wire,
// each link carrying one segment each way at a time. Only the gather phase
// (and the last segment's transfer) is left after the product.
#pragma once

#include "cluster/session/messages.h"
#include "net/channel.h"

#include <mutex>
#include <string>
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

// The topology a group of n_ranks uses when none is asked for: with
// exact partials from four ranks on, the reduce-scatter's fewer bytes per
// link outweigh its second hop on 1 Gbit and slower links (the projection of
// benchmarks/tensor_parallel.sh); fast partials always go all-to-all.
PartialTopology auto_topology(int n_ranks, bool exact);

class PartialExchange {
public:
    // peers[r] for every rank r of the group, this rank's entry with no channel.
    PartialExchange(int rank, std::vector<ExchangePeer> peers, bool exact);

    int rank() const { return rank_; }
    // How many bands a sync of n_tok positions of `width` is cut into: the
    // bands asked for (set_bands, default 1: whole partials), or one when
    // the sync is too large for every band to go out inline (prompt
    // batches). Bands pay where a partial takes long on the wire: each band
    // costs a frame's fixed cost (~20 us here on loopback TCP, sealed) and
    // saves the transfer of the bands before the last while the product
    // goes on (benchmarks/exchange_bench.cpp, README "Tensor parallel").
    void set_bands(int bands) { bands_ = std::max(1, bands); }
    // Reduce-scatter needs exact partials (an Error otherwise); with bands
    // asked for, its bands are its segments.
    void set_topology(PartialTopology topology);
    PartialTopology topology() const { return topology_; }
    int bands_for(int n_tok, int width) const;
    // The band a product of bands_for(n_tok, width) bands computes first:
    // 0, or under reduce-scatter the segment after this rank's own.
    int first_band(int n_tok, int width) const;
    // Sends columns [c0, c1) of every position of this rank's partial of
    // step `step`, before exact_sum or fast_sum of the same step: to every
    // peer, bands in order from column 0; under reduce-scatter to the
    // segment's owner (nothing for this rank's own), segments in order from
    // first_band.
    void send_band(uint32_t step, int n_tok, int width, const double* partial, int c0, int c1);
    int n_ranks() const { return static_cast<int>(peers_.size()); }
    bool exact() const { return exact_; }

    // Every rank calls this with its own partial of the same step (layer
    // tells attention from FFN: 2 * layer + 0/1); what send_band has not sent
    // of it goes now. Exact: `partial` becomes the sum of every rank's. Fast:
    // `sum` gets the sum of every rank's rounded partial. A peer that sends nothing within deadline_ms, fails or
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
    // The exchanges whose partial had begun to go out in bands during the product.
    uint64_t banded_exchanges() const { return banded_exchanges_; }

private:
    // Sends what is left of this rank's partial (all of it as one frame, on
    // a helper thread when large, or the columns after the last band), then
    // receives every peer's bands, each decoded and handed to take(from, c0,
    // c1) (rows in exact_rows_ or float_rows_) as it arrives.
    template <class Take>
    void exchange(const StepHeader& whole, const double* partial, int deadline_ms, Take take);
    // Encodes columns [c0, c1) of every position into message_.
    void encode_band(const StepHeader& whole, const double* partial, int c0, int c1);
    void send_ring();
    void send_to(int to, const std::vector<uint8_t>& message);
    // Receives `from`'s next band of the sync `whole`, starting at column
    // c0 and ending at most at c_end; `pending` are the peers due after it
    // (to tell, on a timeout, which one stalled). Returns the band's header.
    StepHeader receive(int from, std::span<const int> pending, const StepHeader& whole, int c0, int c_end,
                       double deadline);
    // Receives `from`'s bands until they tile [c0, c1), each handed to
    // take(from, c0, c1) with its rows in exact_rows_ / float_rows_.
    template <class Take>
    void receive_columns(int from, std::span<const int> pending, const StepHeader& whole, int c0, int c1,
                         double deadline, Take take);
    void reduce_scatter_sum(const StepHeader& whole, double* partial, int deadline_ms);
    // Segment j's first column under reduce-scatter (segment_begin(N) = width):
    // the bands of SliceForward's banded product, so a band is a segment.
    int segment_begin(int j, int width) const;
    int segment_count(int width) const;
    // Reduce-scatter: the k-th band of the sync (its segment), checked and sent.
    void send_segment(const StepHeader& whole, const double* partial, int c0, int c1);

    int rank_;
    std::vector<ExchangePeer> peers_;
    std::vector<int> order_;  // the peers in receiving order: rank - 1, rank - 2, ... (mod N)
    bool exact_;
    std::vector<PeerStats> stats_;
    int bands_ = 1;
    PartialTopology topology_ = PartialTopology::kAllToAll;
    // The sync whose bands are on their way: its step and how many of its
    // columns have been sent (0: none).
    uint32_t band_step_ = 0;
    int band_n_tok_ = 0, band_width_ = 0, sent_cols_ = 0;
    int sent_segments_ = 0;  // reduce-scatter: the segments of band_step_ sent (or this rank's own, passed)
    std::vector<double> band_rows_;
    std::vector<float> band_floats_;
    std::vector<uint8_t> message_;
    Frame frame_;
    std::vector<double> exact_rows_;
    std::vector<float> float_rows_, own_rows_;
    std::vector<std::vector<float>> by_rank_;  // fast: each rank's rounded partial
    double wait_seconds_ = 0.0;
    uint64_t exchanges_ = 0, banded_exchanges_ = 0;
};

// The rows of a sync a rank may wait for a peer: the io timeout plus, for
// slow peers on long batches, row_budget_ms per row.
int exchange_deadline_ms(int io_timeout_ms, double row_budget_ms, int n_tok);

}  // namespace tessera
