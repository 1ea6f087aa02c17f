#include "net/handshake.h"

#include "net/seal.h"
#include "util/error.h"
#include "util/timer.h"

#include <sodium.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string_view>

namespace tessera {

namespace {

using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;

constexpr uint8_t kModePlain = 0;
constexpr uint8_t kModeKeyed = 1;

// Keyed BLAKE2b-256 over label | client nonce | server nonce.
Mac derive(const WireKey& key, std::string_view label, const Nonce& client, const Nonce& server) {
    crypto_generichash_state state;
    ::crypto_generichash_init(&state, key.bytes.data(), key.bytes.size(), 32);
    ::crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(label.data()), label.size());
    ::crypto_generichash_update(&state, client.data(), client.size());
    ::crypto_generichash_update(&state, server.data(), server.size());
    Mac out;
    ::crypto_generichash_final(&state, out.data(), out.size());
    return out;
}

Nonce fresh_nonce() {
    if (::sodium_init() < 0) throw make_error("libsodium failed to initialize");
    Nonce n;
    ::randombytes_buf(n.data(), n.size());
    return n;
}

SessionKeys session_keys(const WireKey& key, const Nonce& client, const Nonce& server, bool is_client) {
    const Mac c2s = derive(key, "tessera wire v1: client to server", client, server);
    const Mac s2c = derive(key, "tessera wire v1: server to client", client, server);
    SessionKeys keys;
    keys.send = is_client ? c2s : s2c;
    keys.recv = is_client ? s2c : c2s;
    return keys;
}

class Deadline {
public:
    explicit Deadline(int timeout_ms) : timeout_ms_(timeout_ms), end_(now_seconds() + timeout_ms * 1e-3) {}
    int left(const FrameChannel& channel) const {
        const double left_ms = (end_ - now_seconds()) * 1e3;
        if (left_ms < 1) throw make_error("{}: handshake not completed within {} ms", channel.peer(), timeout_ms_);
        return static_cast<int>(std::lround(left_ms));
    }

private:
    int timeout_ms_;
    double end_;
};

void send_bytes(FrameChannel& channel, AuthFrame type, std::initializer_list<std::span<const uint8_t>> parts) {
    channel.send(static_cast<uint16_t>(type), std::span<const std::span<const uint8_t>>(parts.begin(), parts.size()));
}

// Receives a handshake frame of exactly `bytes` bytes (a refusal is reported
// as the key mismatch it is).
void recv_auth(FrameChannel& channel, Frame& frame, AuthFrame expected, size_t bytes, const Deadline& deadline) {
    channel.recv(frame, deadline.left(channel));
    if (frame.type == static_cast<uint16_t>(AuthFrame::kRefused)) {
        throw make_error("{}: refused our proof of the key: the two nodes hold different keys (copy the same key file "
                         "to both)", channel.peer());
    }
    if (frame.type != static_cast<uint16_t>(expected) || frame.payload.size() != bytes) {
        throw make_error("{}: not a tessera peer of this version (unexpected handshake frame {:#x} of {} bytes)",
                         channel.peer(), frame.type, frame.payload.size());
    }
}

void refuse(FrameChannel& channel) {
    try {
        channel.send(static_cast<uint16_t>(AuthFrame::kRefused), std::span<const uint8_t>());
    } catch (const Error&) {
        // The peer may be gone already; the error below is what matters.
    }
}

}  // namespace

double authenticate_as_client(FrameChannel& channel, const WireKey* key, int timeout_ms) {
    const Deadline deadline(timeout_ms);
    const Nonce client = fresh_nonce();
    const uint8_t mode = key != nullptr ? kModeKeyed : kModePlain;
    const double sent = now_seconds();
    send_bytes(channel, AuthFrame::kHello, {std::span<const uint8_t>(&mode, 1), client});
    Frame frame;
    recv_auth(channel, frame, AuthFrame::kChallenge, 1 + 32 + 32, deadline);
    const double round_trip = now_seconds() - sent;
    const uint8_t peer_mode = frame.payload[0];
    if (peer_mode != mode) {
        if (key != nullptr) {
            throw make_error("{} runs without a key, but this node has one: start it with --key (the same key file), "
                             "or run this node without --key", channel.peer());
        }
        throw make_error("{} requires a key: give this node --key FILE (the same key file as the peer's)",
                         channel.peer());
    }
    if (key == nullptr) return round_trip;
    Nonce server;
    Mac server_proof;
    std::memcpy(server.data(), frame.payload.data() + 1, 32);
    std::memcpy(server_proof.data(), frame.payload.data() + 33, 32);
    const Mac expected = derive(*key, "tessera wire v1: server proof", client, server);
    if (::sodium_memcmp(expected.data(), server_proof.data(), 32) != 0) {
        refuse(channel);
        throw make_error("{} holds a different key (its proof of the key does not match ours): copy the same key file "
                         "to every node", channel.peer());
    }
    const Mac proof = derive(*key, "tessera wire v1: client proof", client, server);
    send_bytes(channel, AuthFrame::kProof, {proof});
    channel.set_codec(make_sealing_codec(session_keys(*key, client, server, true), channel.peer()));
    recv_auth(channel, frame, AuthFrame::kAccepted, 0, deadline);
    return round_trip;
}

void authenticate_as_server(FrameChannel& channel, const WireKey* key, int timeout_ms, uint32_t max_payload) {
    const Deadline deadline(timeout_ms);
    channel.set_max_payload(kUnauthenticatedMaxPayload);
    Frame frame;
    recv_auth(channel, frame, AuthFrame::kHello, 1 + 32, deadline);
    const uint8_t peer_mode = frame.payload[0];
    Nonce client;
    std::memcpy(client.data(), frame.payload.data() + 1, 32);
    const uint8_t mode = key != nullptr ? kModeKeyed : kModePlain;
    const Nonce server = fresh_nonce();
    Mac server_proof{};
    if (key != nullptr) server_proof = derive(*key, "tessera wire v1: server proof", client, server);
    send_bytes(channel, AuthFrame::kChallenge, {std::span<const uint8_t>(&mode, 1), server, server_proof});
    if (peer_mode != mode) {
        if (key != nullptr) throw make_error("{} has no key (this node requires one: give it --key)", channel.peer());
        throw make_error("{} uses a key, but this node has none (start it with --key)", channel.peer());
    }
    if (key != nullptr) {
        recv_auth(channel, frame, AuthFrame::kProof, 32, deadline);
        const Mac expected = derive(*key, "tessera wire v1: client proof", client, server);
        if (::sodium_memcmp(expected.data(), frame.payload.data(), 32) != 0) {
            refuse(channel);
            throw make_error("{} holds a different key (its proof of the key does not match ours)", channel.peer());
        }
        channel.set_codec(make_sealing_codec(session_keys(*key, client, server, false), channel.peer()));
        channel.send(static_cast<uint16_t>(AuthFrame::kAccepted), std::span<const uint8_t>());
    }
    channel.set_max_payload(max_payload);
}

}  // namespace tessera
