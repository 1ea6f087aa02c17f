#include "cluster/tensor_parallel/partial_exchange.h"

#include "cluster/session/json_messages.h"
#include "model/slice_forward.h"
#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>

namespace tessera {

namespace {

// Frames up to this size are sent inline: a peer may still hold our previous
// step's frame unread when this one arrives, and two such frames fit the
// socket buffers (set to at least 256 KiB per direction by the channels'
// owners) and a shared-memory ring (512 KiB).
constexpr size_t kInlineFrameBytes = 96u << 10;

// Runs send() on a helper thread while this one runs receive(): frames
// larger than the peers' buffers cannot all go out before this rank reads
// what the peers send it. An error on either side is rethrown here once
// both have ended (the sends end at their own deadlines).
template <class Send, class Receive>
void send_while_receiving(Send send, Receive receive) {
    std::exception_ptr send_error;
    std::thread sender([&] {
        try {
            send();
        } catch (...) {
            send_error = std::current_exception();
        }
    });
    try {
        receive();
    } catch (...) {
        sender.join();
        throw;
    }
    sender.join();
    if (send_error) std::rethrow_exception(send_error);
}

// The header of columns [c0, c1) of every position of the sync `whole`.
StepHeader band_header(const StepHeader& whole, int c0, int c1) {
    StepHeader band = whole;
    band.pos0 = static_cast<uint32_t>(c0);  // a partial's pos0: its band's first column
    band.width = static_cast<uint32_t>(c1 - c0);
    return band;
}

// Columns [c0, c1) of every position of an exact partial, encoded as one
// band into out; scratch holds the gathered rows.
void encode_exact_columns(const StepHeader& whole, const double* partial, int c0, int c1, std::vector<double>& scratch,
                          std::vector<uint8_t>& out) {
    const int n_tok = static_cast<int>(whole.n_tok);
    const int width = static_cast<int>(whole.width);
    const StepHeader band = band_header(whole, c0, c1);
    const size_t bw = static_cast<size_t>(c1 - c0);
    const double* rows = partial;
    if (bw != static_cast<size_t>(width)) {
        scratch.resize(bw * n_tok);
        for (int t = 0; t < n_tok; ++t) {
            std::copy_n(partial + static_cast<size_t>(t) * width + c0, bw, scratch.data() + t * bw);
        }
        rows = scratch.data();
    }
    encode_exact_step(band, rows, out);
}

// Sums of every rank's units travel as packed integers too; fixed_rows.h
// holds values up to 2^19, far beyond any real activation. A sum past it
// means the model's activations overflow: an error, not a wrong encoding.
void require_encodable_sums(const double* partial, int n_tok, int width, int c0, int c1) {
    constexpr double kMax = 524288.0;  // 2^19
    for (int t = 0; t < n_tok; ++t) {
        for (int j = c0; j < c1; ++j) {
            const double v = partial[static_cast<size_t>(t) * width + j];
            if (!(std::fabs(v) <= kMax)) {
                throw make_error("an exact sum of {} at column {} is beyond 2^19: the model's activations overflow", v, j);
            }
        }
    }
}

}  // namespace

PartialTopology auto_topology(int n_ranks, bool exact) {
    return exact && n_ranks >= 4 ? PartialTopology::kReduceScatter : PartialTopology::kAllToAll;
}



int exchange_deadline_ms(int io_timeout_ms, double row_budget_ms, int n_tok) {
    return io_timeout_ms + static_cast<int>(std::min(1e8, row_budget_ms * n_tok));
}

PartialExchange::PartialExchange(int rank, std::vector<ExchangePeer> peers, bool exact)
    : rank_(rank), peers_(std::move(peers)), exact_(exact), stats_(peers_.size()) {
    if (rank_ < 0 || rank_ >= static_cast<int>(peers_.size())) throw make_error("internal: rank {} of {}", rank_, peers_.size());
    for (size_t r = 0; r < peers_.size(); ++r) {
        if ((peers_[r].channel == nullptr) != (static_cast<int>(r) == rank_)) {
            throw make_error("internal: the exchange of rank {} lacks a channel to rank {}", rank_, r);
        }
    }
    const int n = n_ranks();
    for (int k = 1; k < n; ++k) order_.push_back((rank_ - k + n) % n);
}

int PartialExchange::bands_for(int n_tok, int width) const {
    // Bands go out inline while the peers still compute, so all of a sync's
    // must fit what their buffers hold, as one inline frame does (at most 8
    // bytes a value: fixed_rows.h's widest block, or Q8_0/F16).
    constexpr uint64_t kMaxBytesPerValue = 8;
    if (static_cast<uint64_t>(n_tok) * static_cast<uint64_t>(width) * kMaxBytesPerValue > kInlineFrameBytes) return 1;
    if (topology_ == PartialTopology::kAllToAll || bands_ <= 1) return bands_;
    return segment_count(width);
}

int PartialExchange::first_band(int n_tok, int width) const {
    if (topology_ != PartialTopology::kReduceScatter) return 0;
    const int bands = bands_for(n_tok, width);
    return bands > 1 ? (rank_ + 1) % bands : 0;
}

void PartialExchange::set_topology(PartialTopology topology) {
    if (topology == PartialTopology::kReduceScatter && !exact_) {
        throw make_error("the reduce-scatter exchange needs exact partials (not --fast)");
    }
    topology_ = topology;
}

int PartialExchange::segment_count(int width) const {
    return static_cast<int>(SliceForward::partial_band_count(width, n_ranks()));
}

int PartialExchange::segment_begin(int j, int width) const {
    // Whole runs of 64 columns per segment where the width has them (the
    // last takes the rest): the segments past the bands a narrow width
    // allows are empty.
    const int count = segment_count(width);
    if (j <= 0) return 0;
    if (j >= count) return width;
    return static_cast<int>(SliceForward::partial_band_end(width, count, j - 1));
}

void PartialExchange::send_segment(const StepHeader& whole, const double* partial, int c0, int c1) {
    const int width = static_cast<int>(whole.width);
    const int count = segment_count(width);
    const int j = (first_band(static_cast<int>(whole.n_tok), width) + sent_segments_) % count;
    if (sent_segments_ >= count || c0 != segment_begin(j, width) || c1 != segment_begin(j + 1, width)) {
        throw make_error("internal: band [{}, {}) of step {} where segment {} was due", c0, c1, whole.layer, j);
    }
    ++sent_segments_;
    if (j == rank_) return;  // this rank's own: summed here, sent in the gather phase
    encode_exact_columns(whole, partial, c0, c1, band_rows_, message_);
    send_to(j, message_);
}

void PartialExchange::encode_band(const StepHeader& whole, const double* partial, int c0, int c1) {
    if (exact_) {
        encode_exact_columns(whole, partial, c0, c1, band_rows_, message_);
        return;
    }
    const int n_tok = static_cast<int>(whole.n_tok);
    const int width = static_cast<int>(whole.width);
    const StepHeader band = band_header(whole, c0, c1);
    const size_t bw = static_cast<size_t>(c1 - c0);
    band_floats_.resize(bw * n_tok);
    for (int t = 0; t < n_tok; ++t) {
        for (size_t j = 0; j < bw; ++j) {
            band_floats_[t * bw + j] = static_cast<float>(partial[static_cast<size_t>(t) * width + c0 + j]);
        }
    }
    encode_step(band, band_floats_.data(), message_);
    // This rank adds its own rounded partial as the others receive it.
    decode_step(message_, band_floats_, "this rank");
    for (int t = 0; t < n_tok; ++t) {
        std::copy_n(band_floats_.data() + t * bw, bw, own_rows_.data() + static_cast<size_t>(t) * width + c0);
    }
}

void PartialExchange::send_band(uint32_t step, int n_tok, int width, const double* partial, int c0, int c1) {
    if (topology_ == PartialTopology::kReduceScatter) {
        if (sent_segments_ == 0) {
            band_step_ = step;
            band_n_tok_ = n_tok;
            band_width_ = width;
        } else if (step != band_step_ || n_tok != band_n_tok_ || width != band_width_) {
            throw make_error("internal: a band of step {} while the segments of step {} are out", step, band_step_);
        }
        send_segment({step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width), WireFormat::Fixed},
                     partial, c0, c1);
        return;
    }
    if (sent_cols_ == 0) {
        band_step_ = step;
        band_n_tok_ = n_tok;
        band_width_ = width;
        if (!exact_) own_rows_.resize(static_cast<size_t>(n_tok) * width);
    }
    if (step != band_step_ || n_tok != band_n_tok_ || width != band_width_ || c0 != sent_cols_ || c1 <= c0 ||
        c1 > width || (!exact_ && width % 32 == 0 && (c1 - c0) % 32 != 0 && c1 != width)) {
        throw make_error("internal: band [{}, {}) of step {} after {} columns of step {}", c0, c1, step, sent_cols_,
                         band_step_);
    }
    const StepHeader whole{step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width),
                           exact_ ? WireFormat::Fixed : (width % 32 == 0 ? WireFormat::Q8_0 : WireFormat::F16)};
    encode_band(whole, partial, c0, c1);
    send_ring();
    sent_cols_ = c1;
}

void PartialExchange::send_ring() {
    const int n = n_ranks();
    for (int k = 1; k < n; ++k) send_to((rank_ + k) % n, message_);
}

void PartialExchange::send_to(int to, const std::vector<uint8_t>& message) {
    ExchangePeer& p = peers_[static_cast<size_t>(to)];
    try {
        if (p.send_mutex != nullptr) {
            std::lock_guard<std::mutex> lock(*p.send_mutex);
            p.channel->send(static_cast<uint16_t>(SessionMessage::kPartial), message);
        } else {
            p.channel->send(static_cast<uint16_t>(SessionMessage::kPartial), message);
        }
    } catch (const Error& e) {
        throw make_error("{}: {}", p.name, e.what());
    }
    stats_[static_cast<size_t>(to)].bytes_sent += message.size();
}

StepHeader PartialExchange::receive(int from, std::span<const int> pending, const StepHeader& whole, int c0,
                                    int c_end, double deadline) {
    ExchangePeer& p = peers_[static_cast<size_t>(from)];
    const int deadline_ms = static_cast<int>(std::lround((deadline - now_seconds()) * 1e3));
    bool beating = false;
    for (;;) {
        const int left = static_cast<int>((deadline - now_seconds()) * 1e3);
        if (left <= 0) {
            // A peer still due that has sent nothing at all, not even a
            // heartbeat, is the one that stalled: `from` may only be waiting
            // for it.
            for (int q : pending) {
                if (!peers_[static_cast<size_t>(q)].channel->poll(0)) {
                    throw make_error("{} sent nothing (no partial, no heartbeat) for {} ms (--step-timeout-ms)",
                                     peers_[static_cast<size_t>(q)].name, std::max(0, deadline_ms));
                }
            }
            // Beats prove the process lives, not that it makes progress.
            throw make_error("{} {} for {} ms (--step-timeout-ms)", p.name,
                             beating ? "sends heartbeats but no result" : "sent no partial", std::max(0, deadline_ms));
        }
        try {
            // Nothing until the deadline is the stall named above, not a
            // broken channel.
            if (!p.channel->poll(left)) continue;
            p.channel->recv(frame_);
        } catch (const Error& e) {
            throw make_error("{} stopped responding: {}", p.name, e.what());
        }
        stats_[static_cast<size_t>(from)].bytes_received += frame_.payload.size();
        const auto type = static_cast<SessionMessage>(frame_.type);
        if (type == SessionMessage::kHeartbeat) {
            beating = true;  // alive; the deadline still runs
            continue;
        }
        if (type == SessionMessage::kError) parse_json_message(frame_, SessionMessage::kPartial, p.name);  // throws "failed: ..."
        if (type != SessionMessage::kPartial) throw make_error("{}: unexpected {} message", p.name, tp_message_name(frame_.type));
        const uint64_t left_values = static_cast<uint64_t>(whole.n_tok) * static_cast<uint32_t>(c_end - c0);
        const StepHeader got = exact_ ? decode_exact_step(frame_.payload, exact_rows_, p.name.c_str(), left_values)
                                      : decode_step(frame_.payload, float_rows_, p.name.c_str());
        if (got.layer != whole.layer || got.n_tok != whole.n_tok || got.pos0 != static_cast<uint32_t>(c0) ||
            got.width == 0 || got.width > static_cast<uint32_t>(c_end - c0)) {
            throw make_error("{}: partial for step {} ({} rows of columns [{}, {})) where step {} ({} rows of "
                             "columns from {} to at most {}) was due",
                             p.name, got.layer, got.n_tok, got.pos0, static_cast<uint64_t>(got.pos0) + got.width,
                             whole.layer, whole.n_tok, c0, c_end);
        }
        // Exact rows need no scan: decode_fixed_rows makes every value from
        // an integer it has bounded, so each is finite by construction.
        if (!exact_) require_finite(float_rows_.data(), float_rows_.size(), p.name);
        return got;
    }
}

template <class Take>
void PartialExchange::receive_columns(int from, std::span<const int> pending, const StepHeader& whole, int c0, int c1,
                                      double deadline, Take take) {
    while (c0 < c1) {
        const StepHeader band = receive(from, pending, whole, c0, c1, deadline);
        const int end = c0 + static_cast<int>(band.width);
        take(from, c0, end);
        c0 = end;
    }
}

template <class Take>
void PartialExchange::exchange(const StepHeader& whole, const double* partial, int deadline_ms, Take take) {
    const int n = n_ranks();
    const int width = static_cast<int>(whole.width);
    ++exchanges_;
    const double start = now_seconds();
    const auto receive_all = [&] {
        for (int k = 1; k < n; ++k) {
            const int from = order_[static_cast<size_t>(k - 1)];
            const double deadline = now_seconds() + deadline_ms * 1e-3;
            const auto pending = std::span<const int>(order_).subspan(static_cast<size_t>(k));
            receive_columns(from, pending, whole, 0, width, deadline, take);
            stats_[static_cast<size_t>(from)].partials++;
            stats_[static_cast<size_t>(from)].arrival_seconds = now_seconds();
        }
    };
    const int sent = sent_cols_;
    if (sent > 0 && (whole.layer != band_step_ || static_cast<int>(whole.n_tok) != band_n_tok_ || width != band_width_)) {
        throw make_error("internal: step {} summed while the bands of step {} are out", whole.layer, band_step_);
    }
    sent_cols_ = 0;  // this sync's bands end here, whatever happens
    if (sent > 0) {
        ++banded_exchanges_;
        // The bands went out as the product computed them; the rest now.
        if (sent < width) {
            encode_band(whole, partial, sent, width);
            send_ring();
        }
        receive_all();
        wait_seconds_ += now_seconds() - start;
        return;
    }
    encode_band(whole, partial, 0, width);
    if (message_.size() <= kInlineFrameBytes) {
        send_ring();
        receive_all();
    } else {
        // A prompt batch: a frame may be larger than what the peer's
        // buffers hold.
        send_while_receiving([&] { send_ring(); }, receive_all);
    }
    wait_seconds_ += now_seconds() - start;
}

void PartialExchange::exact_sum(uint32_t step, int n_tok, int width, double* partial, int deadline_ms) {
    if (!exact_) throw make_error("internal: an exact sum on a fast exchange");
    const StepHeader whole{step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width), WireFormat::Fixed};
    if (topology_ == PartialTopology::kReduceScatter) return reduce_scatter_sum(whole, partial, deadline_ms);
    // Exact sums: the order of the additions does not matter.
    exchange(whole, partial, deadline_ms, [&](int, int c0, int c1) {
        const size_t bw = static_cast<size_t>(c1 - c0);
        for (int t = 0; t < n_tok; ++t) {
            double* row = partial + static_cast<size_t>(t) * width + c0;
            const double* got = exact_rows_.data() + t * bw;
            for (size_t j = 0; j < bw; ++j) row[j] += got[j];
        }
    });
}

void PartialExchange::fast_sum(uint32_t step, int n_tok, int width, const double* partial, float* sum, int deadline_ms) {
    if (exact_) throw make_error("internal: a fast sum on an exact exchange");
    // Q8_0 needs rows of whole blocks; other widths travel as F16.
    const WireFormat format = width % 32 == 0 ? WireFormat::Q8_0 : WireFormat::F16;
    const StepHeader whole{step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width), format};
    const size_t count = static_cast<size_t>(n_tok) * width;
    // Float sums depend on their order: every rank adds in rank order, so
    // the partials are kept until all have arrived.
    const int n = n_ranks();
    std::vector<std::vector<float>>& rows = by_rank_;
    rows.resize(static_cast<size_t>(n));
    for (auto& r : rows) r.resize(count);
    own_rows_.resize(count);
    exchange(whole, partial, deadline_ms, [&](int from, int c0, int c1) {
        const size_t bw = static_cast<size_t>(c1 - c0);
        float* dst = rows[static_cast<size_t>(from)].data();
        for (int t = 0; t < n_tok; ++t) {
            std::copy_n(float_rows_.data() + t * bw, bw, dst + static_cast<size_t>(t) * width + c0);
        }
    });
    rows[static_cast<size_t>(rank_)].swap(own_rows_);
    std::copy_n(rows[0].data(), count, sum);
    for (int r = 1; r < n; ++r) {
        const float* p = rows[static_cast<size_t>(r)].data();
        for (size_t j = 0; j < count; ++j) sum[j] += p[j];
    }
    own_rows_.swap(rows[static_cast<size_t>(rank_)]);
}

void PartialExchange::reduce_scatter_sum(const StepHeader& whole, double* partial, int deadline_ms) {
    const int n = n_ranks();
    const int n_tok = static_cast<int>(whole.n_tok);
    const int width = static_cast<int>(whole.width);
    const int own0 = segment_begin(rank_, width), own1 = segment_begin(rank_ + 1, width);
    const int banded = sent_segments_;
    sent_segments_ = 0;  // this sync's bands end here, whatever happens
    if (banded > 0 && (whole.layer != band_step_ || static_cast<int>(whole.n_tok) != band_n_tok_ || width != band_width_)) {
        throw make_error("internal: step {} summed while the segments of step {} are out", whole.layer, band_step_);
    }
    ++exchanges_;
    if (banded > 0) ++banded_exchanges_;
    const double start = now_seconds();
    // Sends in ring order (rank + 1, rank + 2, ...), receives in reverse, as
    // the all-to-all does, so neither phase can deadlock; frames too large
    // for the peers' buffers go from a helper thread while this one receives.
    const bool threaded = banded == 0 &&
        static_cast<uint64_t>(n_tok) * static_cast<uint64_t>(width / n + 32) * 8 > kInlineFrameBytes;
    const auto phase = [&](auto send_all, auto receive_all) {
        if (!threaded) {
            send_all(band_rows_, message_);
            receive_all();
            return;
        }
        send_while_receiving(
            [&] {
                std::vector<double> scratch;  // the helper's own buffers
                std::vector<uint8_t> out;
                send_all(scratch, out);
            },
            receive_all);
    };
    const auto each_peer = [&](auto body) {
        for (int k = 1; k < n; ++k) {
            body(order_[static_cast<size_t>(k - 1)], std::span<const int>(order_).subspan(static_cast<size_t>(k)));
        }
    };
    // 1. Segment j of this rank's partial to rank j (what the bands have
    //    not sent yet); each peer's share of this rank's segment added in
    //    (the order of exact sums is free).
    phase(
        [&](std::vector<double>& scratch, std::vector<uint8_t>& out) {
            if (banded > 0) {
                // Bands were sent inline: what is left goes inline too.
                sent_segments_ = banded;
                while (sent_segments_ < segment_count(width)) {
                    const int j = (first_band(n_tok, width) + sent_segments_) % segment_count(width);
                    send_segment(whole, partial, segment_begin(j, width), segment_begin(j + 1, width));
                }
                sent_segments_ = 0;
                return;
            }
            for (int k = 1; k < n; ++k) {
                const int to = (rank_ + k) % n;
                const int c0 = segment_begin(to, width), c1 = segment_begin(to + 1, width);
                if (c1 == c0) continue;
                encode_exact_columns(whole, partial, c0, c1, scratch, out);
                send_to(to, out);
            }
        },
        [&] {
            const double deadline = now_seconds() + deadline_ms * 1e-3;
            each_peer([&](int from, std::span<const int> pending) {
                receive_columns(from, pending, whole, own0, own1, deadline, [&](int, int c0, int c1) {
                    const size_t bw = static_cast<size_t>(c1 - c0);
                    for (int t = 0; t < n_tok; ++t) {
                        double* row = partial + static_cast<size_t>(t) * width + c0;
                        for (size_t j = 0; j < bw; ++j) row[j] += exact_rows_[t * bw + j];
                    }
                });
            });
        });
    // 2. This rank's segment, now the sum of every rank's, to every peer;
    //    theirs in place of this rank's shares of them.
    require_encodable_sums(partial, n_tok, width, own0, own1);
    phase(
        [&](std::vector<double>& scratch, std::vector<uint8_t>& out) {
            if (own1 == own0) return;
            encode_exact_columns(whole, partial, own0, own1, scratch, out);
            for (int k = 1; k < n; ++k) send_to((rank_ + k) % n, out);
        },
        [&] {
            const double deadline = now_seconds() + deadline_ms * 1e-3;
            each_peer([&](int from, std::span<const int> pending) {
                receive_columns(from, pending, whole, segment_begin(from, width), segment_begin(from + 1, width),
                                deadline, [&](int, int c0, int c1) {
                                    const size_t bw = static_cast<size_t>(c1 - c0);
                                    for (int t = 0; t < n_tok; ++t) {
                                        std::copy_n(exact_rows_.data() + t * bw, bw,
                                                    partial + static_cast<size_t>(t) * width + c0);
                                    }
                                });
                stats_[static_cast<size_t>(from)].partials++;
                stats_[static_cast<size_t>(from)].arrival_seconds = now_seconds();
            });
        });
    wait_seconds_ += now_seconds() - start;
}

}  // namespace tessera
