#include "cluster/partial_exchange.h"

#include "cluster/json_messages.h"
#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace tessera {

namespace {

// Frames up to this size are sent inline: a peer may still hold our previous
// step's frame unread when this one arrives, and two such frames fit the
// socket buffers (set to at least 256 KiB per direction by the channels'
// owners) and a shared-memory ring (512 KiB).
constexpr size_t kInlineFrameBytes = 96u << 10;

}  // namespace

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

void PartialExchange::send_ring() {
    const int n = n_ranks();
    for (int k = 1; k < n; ++k) {
        const int to = (rank_ + k) % n;
        ExchangePeer& p = peers_[static_cast<size_t>(to)];
        try {
            if (p.send_mutex != nullptr) {
                std::lock_guard<std::mutex> lock(*p.send_mutex);
                p.channel->send(static_cast<uint16_t>(TpMessage::kPartial), message_);
            } else {
                p.channel->send(static_cast<uint16_t>(TpMessage::kPartial), message_);
            }
        } catch (const Error& e) {
            throw make_error("{}: {}", p.name, e.what());
        }
        stats_[static_cast<size_t>(to)].bytes_sent += message_.size();
    }
}

void PartialExchange::receive(int from, std::span<const int> pending, const StepHeader& sent, int deadline_ms) {
    ExchangePeer& p = peers_[static_cast<size_t>(from)];
    const double start = now_seconds();
    bool beating = false;
    for (;;) {
        const int left = deadline_ms - static_cast<int>((now_seconds() - start) * 1e3);
        if (left <= 0) {
            // A peer still due that has sent nothing at all, not even a
            // heartbeat, is the one that stalled: `from` may only be waiting
            // for it.
            for (int q : pending) {
                if (!peers_[static_cast<size_t>(q)].channel->poll(0)) {
                    throw make_error("{} sent nothing (no partial, no heartbeat) for {} ms (--step-timeout-ms)",
                                     peers_[static_cast<size_t>(q)].name, deadline_ms);
                }
            }
            // Beats prove the process lives, not that it makes progress.
            throw make_error("{} {} for {} ms (--step-timeout-ms)", p.name,
                             beating ? "sends heartbeats but no result" : "sent no partial", deadline_ms);
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
        const auto type = static_cast<TpMessage>(frame_.type);
        if (type == TpMessage::kHeartbeat) {
            beating = true;  // alive; the deadline still runs
            continue;
        }
        if (type == TpMessage::kError) parse_json_message(frame_, TpMessage::kPartial, p.name);  // throws "failed: ..."
        if (type != TpMessage::kPartial) throw make_error("{}: unexpected {} message", p.name, tp_message_name(frame_.type));
        const StepHeader got = exact_ ? decode_exact_step(frame_.payload, exact_rows_, p.name.c_str(),
                                                          static_cast<uint64_t>(sent.n_tok) * sent.width)
                                      : decode_step(frame_.payload, float_rows_, p.name.c_str());
        if (got.layer != sent.layer || got.n_tok != sent.n_tok || got.width != sent.width) {
            throw make_error("{}: partial for step {} ({} rows of {}) where step {} ({} rows of {}) was due", p.name,
                             got.layer, got.n_tok, got.width, sent.layer, sent.n_tok, sent.width);
        }
        if (exact_) require_finite(exact_rows_.data(), exact_rows_.size(), p.name);
        else require_finite(float_rows_.data(), float_rows_.size(), p.name);
        stats_[static_cast<size_t>(from)].partials++;
        stats_[static_cast<size_t>(from)].arrival_seconds = now_seconds();
        return;
    }
}

template <class Take>
void PartialExchange::exchange(const StepHeader& header, int deadline_ms, Take take) {
    const int n = n_ranks();
    ++exchanges_;
    const double start = now_seconds();
    const auto receive_all = [&] {
        for (int k = 1; k < n; ++k) {
            const int from = order_[static_cast<size_t>(k - 1)];
            receive(from, std::span<const int>(order_).subspan(static_cast<size_t>(k)), header, deadline_ms);
            take(from);
        }
    };
    if (message_.size() <= kInlineFrameBytes) {
        send_ring();
        receive_all();
    } else {
        // A prompt batch: a frame may be larger than what the peer's
        // buffers hold, so the sends go on while this thread receives.
        std::exception_ptr send_error;
        std::thread sender([&] {
            try {
                send_ring();
            } catch (...) {
                send_error = std::current_exception();
            }
        });
        try {
            receive_all();
        } catch (...) {
            sender.join();  // its sends end at their own deadlines
            throw;
        }
        sender.join();
        if (send_error) std::rethrow_exception(send_error);
    }
    wait_seconds_ += now_seconds() - start;
}

void PartialExchange::exact_sum(uint32_t step, int n_tok, int width, double* partial, int deadline_ms) {
    if (!exact_) throw make_error("internal: an exact sum on a fast exchange");
    const StepHeader header{step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width), WireFormat::Fixed};
    encode_exact_step(header, partial, message_);
    const size_t count = static_cast<size_t>(n_tok) * width;
    // Exact sums: the order of the additions does not matter.
    exchange(header, deadline_ms, [&](int) {
        for (size_t j = 0; j < count; ++j) partial[j] += exact_rows_[j];
    });
}

void PartialExchange::fast_sum(uint32_t step, int n_tok, int width, const double* partial, float* sum, int deadline_ms) {
    if (exact_) throw make_error("internal: a fast sum on an exact exchange");
    // Q8_0 needs rows of whole blocks; other widths travel as F16.
    const WireFormat format = width % 32 == 0 ? WireFormat::Q8_0 : WireFormat::F16;
    const StepHeader header{step, 0, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(width), format};
    const size_t count = static_cast<size_t>(n_tok) * width;
    own_rows_.resize(count);
    for (size_t j = 0; j < count; ++j) own_rows_[j] = static_cast<float>(partial[j]);
    encode_step(header, own_rows_.data(), message_);
    // This rank adds its own partial as the others receive it.
    decode_step(message_, own_rows_, "this rank");
    // Float sums depend on their order: every rank adds in rank order, so
    // the partials are kept until all have arrived.
    const int n = n_ranks();
    std::vector<std::vector<float>>& rows = by_rank_;
    rows.resize(static_cast<size_t>(n));
    rows[static_cast<size_t>(rank_)].swap(own_rows_);
    exchange(header, deadline_ms, [&](int from) { rows[static_cast<size_t>(from)].swap(float_rows_); });
    std::copy_n(rows[0].data(), count, sum);
    for (int r = 1; r < n; ++r) {
        const float* p = rows[static_cast<size_t>(r)].data();
        for (size_t j = 0; j < count; ++j) sum[j] += p[j];
    }
    own_rows_.swap(rows[static_cast<size_t>(rank_)]);
}

}  // namespace tessera
