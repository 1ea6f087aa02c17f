// A framed, ordered, checked message channel over one TCP connection: what
// every edge of a plan (root <-> worker, stage -> stage) speaks.
//
// Each direction numbers its frames from 0; a received frame must carry
// exactly the next number. Payload bytes pass through a FrameCodec: the plain
// codec leaves them as they are, and a sealing codec (authenticated encryption
// with the sequence number as nonce) can replace it without any caller of
// FrameChannel changing.
#pragma once

#include "net/frame.h"
#include "net/shm_link.h"
#include "net/tcp.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// How payload bytes are protected on the wire.
class FrameCodec {
public:
    virtual ~FrameCodec() = default;
    // Bytes the codec adds to each payload (e.g. an authentication tag).
    virtual uint32_t overhead() const = 0;
    // Header flags frames of this codec carry; a receiver refuses others.
    virtual uint32_t flags() const = 0;
    // Turns a payload into its wire bytes in place: `body` holds the payload
    // followed by overhead() bytes of room. The header, already final (its
    // encoding in header_bytes), may be authenticated as associated data.
    virtual void seal(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) = 0;
    // The inverse, in place over the wire bytes (the payload is then the
    // first body.size() - overhead() bytes); throws an Error on a forged or
    // corrupted frame.
    virtual void open(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) = 0;
    // Called when the channel is about to wait for the peer: a codec may do
    // now, while idle, the work for the next frames that does not depend on
    // their bytes (next_send and next_recv are their sequence numbers). The
    // two sides are called apart: another thread may be sending (a
    // heartbeat) while this one waits, and only the sender touches its side.
    virtual void prepare_send(uint64_t next_send) { (void)next_send; }
    virtual void prepare_recv(uint64_t next_recv) { (void)next_recv; }
};

// Sends payloads as they are.
std::unique_ptr<FrameCodec> make_plain_codec();

struct Frame {
    uint16_t type = 0;
    uint64_t sequence = 0;
    std::vector<uint8_t> payload;  // reused across receives: no allocation once grown
};

struct ChannelLimits {
    uint32_t max_payload = 64u << 20;  // larger claims are refused before reading
    // A frame, once its first byte has arrived (or a send, once begun), must
    // complete within io_timeout_ms plus 1 ms per KiB: a deadline for the
    // whole frame, not for the time between bytes, so a peer trickling one
    // byte at a time cannot hold a node, while a large frame on a slow link
    // (at least 1 MB/s) still gets through.
    int io_timeout_ms = 5000;
    int spin_us = 100;                 // see TcpStream::set_spin_before_sleep
};

class FrameChannel {
public:
    FrameChannel(TcpStream stream, ChannelLimits limits, std::unique_ptr<FrameCodec> codec = make_plain_codec());

    // Sends one frame whose payload is the concatenation of parts.
    void send(uint16_t type, std::span<const std::span<const uint8_t>> parts);
    void send(uint16_t type, std::span<const uint8_t> payload);

    // Receives the next frame into `frame` within timeout_ms (default: the
    // channel's io timeout); throws an Error naming the peer otherwise.
    void recv(Frame& frame, int timeout_ms = -1);
    // True when a frame has started to arrive within timeout_ms.
    bool poll(int timeout_ms);

    // From now on frames travel through `link` (same host), the TCP
    // connection only telling that the peer is alive. Both sides switch at
    // the same frame boundary: after the last frame either sent on TCP.
    // Frames through the link are not sealed again: the segment is the
    // user's alone (mode 0600), its name and nonce travelled sealed to a peer
    // that proved the key, and whoever can read it can read both processes'
    // memory anyway; sealing there cost a same-host group ~5-25% of its
    // token time. Both sides switch codecs at the same boundary.
    void use_shared_memory(std::unique_ptr<ShmLink> link);
    bool on_shared_memory() const { return shm_ != nullptr; }
    // Whether the peer's address is on this host's loopback (127/8, ::1).
    bool peer_is_loopback() const { return stream_.peer_is_loopback(); }

    const std::string& peer() const { return stream_.peer(); }
    // For waiting on several TCP channels at once (poll); not for one on
    // shared memory.
    int fd() const { return stream_.fd(); }
    void close() { stream_.close(); }
    void set_socket_buffers(int bytes) { stream_.set_buffer_bytes(bytes); }
    void set_codec(std::unique_ptr<FrameCodec> codec) {
        authenticated_ = authenticated_ || codec->flags() != 0;
        codec_ = std::move(codec);
    }
    // Whether the peer proved the cluster key (the channel was sealed), also
    // after its frames moved to shared memory.
    bool sealed() const { return authenticated_; }
    // Whether the frames sent now are sealed (never through shared memory).
    bool frames_sealed() const { return codec_->flags() != 0; }
    // Frames larger than this are refused before reading (an unauthenticated
    // peer gets a small cap, an authenticated one the limits' cap).
    void set_max_payload(uint32_t bytes) { limits_.max_payload = bytes; }
    const ChannelLimits& limits() const { return limits_; }

private:
    TcpStream stream_;
    ChannelLimits limits_;
    std::unique_ptr<FrameCodec> codec_;
    std::unique_ptr<ShmLink> shm_;
    bool authenticated_ = false;
    // Sends may come from several threads (a heartbeat beside the step
    // loop); one at a time, and the send side's preparation only between them.
    // (Held by pointer: a channel may be moved before it is used.)
    std::unique_ptr<std::mutex> send_mutex_ = std::make_unique<std::mutex>();
    uint64_t next_send_ = 0;
    uint64_t next_recv_ = 0;
    std::vector<uint8_t> send_buffer_;

    void write_all(const void* data, size_t n);
    void read_exact(void* data, size_t n, int timeout_ms);
    // The whole-frame budget for n bytes (see ChannelLimits::io_timeout_ms).
    int budget_ms(size_t n) const;
};

}  // namespace tessera
