#include "net/channel.h"

#include "util/error.h"

#include <algorithm>
#include <cstring>

namespace tessera {

namespace {
class PlainCodec final : public FrameCodec {
public:
    uint32_t overhead() const override { return 0; }
    uint32_t flags() const override { return 0; }
    void seal(const FrameHeader&, std::span<const uint8_t>, std::span<uint8_t>) override {}
    void open(const FrameHeader&, std::span<const uint8_t>, std::span<uint8_t>) override {}
};
}  // namespace

std::unique_ptr<FrameCodec> make_plain_codec() { return std::make_unique<PlainCodec>(); }

FrameChannel::FrameChannel(TcpStream stream, ChannelLimits limits, std::unique_ptr<FrameCodec> codec)
    : stream_(std::move(stream)), limits_(limits), codec_(std::move(codec)) {
    authenticated_ = codec_->flags() != 0;
    stream_.set_spin_before_sleep(limits.spin_us);
}

void FrameChannel::use_shared_memory(std::unique_ptr<ShmLink> link) {
    link->set_spin_before_sleep(limits_.spin_us);
    const std::lock_guard<std::mutex> lock(*send_mutex_);  // a heartbeat may be sending
    shm_ = std::move(link);
    codec_ = make_plain_codec();
}

bool FrameChannel::poll(int timeout_ms) {
    codec_->prepare_recv(next_recv_);
    {
        const std::unique_lock<std::mutex> lock(*send_mutex_, std::try_to_lock);
        if (lock.owns_lock()) codec_->prepare_send(next_send_);
    }
    return shm_ ? shm_->wait_readable(timeout_ms, stream_) : stream_.wait_readable(timeout_ms);
}

int FrameChannel::budget_ms(size_t n) const {
    return static_cast<int>(std::min<uint64_t>(limits_.io_timeout_ms + n / 1024, 1u << 30));
}

void FrameChannel::write_all(const void* data, size_t n) {
    if (shm_) {
        shm_->write_all(data, n, budget_ms(n), stream_);
    } else {
        stream_.write_all(data, n, budget_ms(n));
    }
}

void FrameChannel::read_exact(void* data, size_t n, int timeout_ms) {
    if (shm_) {
        shm_->read_exact(data, n, timeout_ms, stream_);
    } else {
        stream_.read_exact(data, n, timeout_ms);
    }
}

void FrameChannel::send(uint16_t type, std::span<const uint8_t> payload) {
    const std::span<const uint8_t> parts[] = {payload};
    send(type, parts);
}

void FrameChannel::send(uint16_t type, std::span<const std::span<const uint8_t>> parts) {
    const std::lock_guard<std::mutex> lock(*send_mutex_);
    size_t body = 0;
    for (const auto& p : parts) body += p.size();
    const uint32_t overhead = codec_->overhead();
    if (body + overhead > limits_.max_payload) {
        throw make_error("{}: refusing to send a frame of {} bytes (limit {})", peer(), body, limits_.max_payload);
    }
    FrameHeader header;
    header.type = type;
    header.sequence = next_send_;
    header.length = static_cast<uint32_t>(body + overhead);
    header.flags = codec_->flags();
    // One buffer, one write: header, body and seal leave in the same segment.
    send_buffer_.resize(kFrameHeaderBytes + body + overhead);
    const FrameHeaderBytes hb = encode_frame_header(header);
    std::memcpy(send_buffer_.data(), hb.data(), hb.size());
    size_t at = kFrameHeaderBytes;
    for (const auto& p : parts) {
        if (!p.empty()) std::memcpy(send_buffer_.data() + at, p.data(), p.size());
        at += p.size();
    }
    codec_->seal(header, hb, std::span<uint8_t>(send_buffer_.data() + kFrameHeaderBytes, body + overhead));
    write_all(send_buffer_.data(), send_buffer_.size());
    ++next_send_;
}

void FrameChannel::recv(Frame& frame, int timeout_ms) {
    const int wait_ms = timeout_ms < 0 ? limits_.io_timeout_ms : timeout_ms;
    FrameHeaderBytes hb;
    // Waiting for a frame to begin may take long (a user typing); once it
    // has begun, the whole frame must arrive within its budget.
    if (!poll(wait_ms)) throw make_error("{}: no data for {} ms (peer stalled or unreachable)", peer(), wait_ms);
    read_exact(hb.data(), hb.size(), budget_ms(hb.size()));
    const FrameHeader header = decode_frame_header(hb, limits_.max_payload, peer().c_str());
    if (header.sequence != next_recv_) {
        throw make_error("{}: frame number {} arrived where {} was due (replayed, lost or reordered)", peer(),
                         header.sequence, next_recv_);
    }
    if (header.flags != codec_->flags()) {
        throw make_error("{}: frame flags {:#x} do not match this channel's {:#x} (sealed and plain peers mixed?)",
                         peer(), header.flags, codec_->flags());
    }
    if (header.length < codec_->overhead()) {
        throw make_error("{}: frame of {} bytes is shorter than its seal", peer(), header.length);
    }
    frame.payload.resize(header.length);
    if (header.length > 0) read_exact(frame.payload.data(), header.length, budget_ms(header.length));
    codec_->open(header, hb, frame.payload);
    frame.payload.resize(header.length - codec_->overhead());
    frame.type = header.type;
    frame.sequence = header.sequence;
    ++next_recv_;
}

}  // namespace tessera
