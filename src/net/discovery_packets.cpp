#include "net/discovery_packets.h"

#include "util/error.h"
#include "util/little_endian.h"

#include <sodium.h>

#include <cstring>
#include <string_view>

namespace tessera {

namespace {

constexpr uint8_t kMagic[4] = {'T', 'S', 'D', '1'};
constexpr uint8_t kProbeKind = 1, kReplyKind = 2;
constexpr size_t kHeaderBytes = 8;
constexpr size_t kNonceBytes = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kTagBytes = crypto_aead_xchacha20poly1305_ietf_ABYTES;
constexpr size_t kProbeBytes = 16 + 8;
constexpr size_t kReplyFixedBytes = 16 + 16 + 2 + 1;

std::array<uint8_t, 32> derive(const WireKey& key, std::string_view label) {
    std::array<uint8_t, 32> out{};
    ::crypto_generichash(out.data(), out.size(), reinterpret_cast<const uint8_t*>(label.data()), label.size(),
                         key.bytes.data(), key.bytes.size());
    return out;
}

std::vector<uint8_t> seal(const std::array<uint8_t, 32>& key, uint8_t kind, const std::vector<uint8_t>& plain) {
    std::vector<uint8_t> out(kHeaderBytes + kNonceBytes + plain.size() + kTagBytes, 0);
    std::memcpy(out.data(), kMagic, 4);
    out[4] = kind;
    uint8_t* nonce = out.data() + kHeaderBytes;
    ::randombytes_buf(nonce, kNonceBytes);
    unsigned long long sealed = 0;
    ::crypto_aead_xchacha20poly1305_ietf_encrypt(out.data() + kHeaderBytes + kNonceBytes, &sealed, plain.data(),
                                                 plain.size(), out.data(), kHeaderBytes, nullptr, nonce, key.data());
    return out;
}

// The plain bytes of a packet of `kind`, or nothing with the verdict.
std::optional<std::vector<uint8_t>> open(const std::array<uint8_t, 32>& key, uint8_t kind,
                                         std::span<const uint8_t> packet, size_t min_plain, size_t max_plain,
                                         PacketVerdict& why) {
    if (packet.size() > kMaxDiscoveryPacket) {
        why = PacketVerdict::kOversized;
        return std::nullopt;
    }
    const size_t overhead = kHeaderBytes + kNonceBytes + kTagBytes;
    if (packet.size() < overhead + min_plain || packet.size() > overhead + max_plain ||
        std::memcmp(packet.data(), kMagic, 4) != 0 || packet[4] != kind || packet[5] != 0 || packet[6] != 0 ||
        packet[7] != 0) {
        why = PacketVerdict::kMalformed;
        return std::nullopt;
    }
    std::vector<uint8_t> plain(packet.size() - overhead);
    unsigned long long n = 0;
    const uint8_t* nonce = packet.data() + kHeaderBytes;
    const uint8_t* sealed = nonce + kNonceBytes;
    if (::crypto_aead_xchacha20poly1305_ietf_decrypt(plain.data(), &n, nullptr, sealed,
                                                     packet.size() - kHeaderBytes - kNonceBytes, packet.data(),
                                                     kHeaderBytes, nonce, key.data()) != 0) {
        why = PacketVerdict::kUnauthenticated;
        return std::nullopt;
    }
    why = PacketVerdict::kOk;
    return plain;
}

}  // namespace

DiscoveryKeys discovery_keys(const WireKey& key) {
    if (::sodium_init() < 0) throw make_error("libsodium failed to initialize");
    return {derive(key, "tessera discovery probe v1"), derive(key, "tessera discovery reply v1")};
}

DiscoveryId random_discovery_id() {
    DiscoveryId id;
    ::randombytes_buf(id.data(), id.size());
    return id;
}

std::string discovery_id_hex(const DiscoveryId& id) {
    std::string out;
    for (uint8_t b : id) out += fmt::format("{:02x}", b);
    return out;
}

const char* packet_verdict_name(PacketVerdict v) {
    switch (v) {
        case PacketVerdict::kOk: return "ok";
        case PacketVerdict::kOversized: return "oversized";
        case PacketVerdict::kMalformed: return "malformed";
        case PacketVerdict::kUnauthenticated: return "unauthenticated";
    }
    return "?";
}

std::vector<uint8_t> seal_probe(const DiscoveryKeys& keys, const DiscoveryProbe& probe) {
    std::vector<uint8_t> plain(probe.id.begin(), probe.id.end());
    append_le(plain, static_cast<uint64_t>(probe.time_ms), 8);
    return seal(keys.probe, kProbeKind, plain);
}

std::vector<uint8_t> seal_reply(const DiscoveryKeys& keys, const DiscoveryReply& reply) {
    std::vector<uint8_t> plain(reply.probe_id.begin(), reply.probe_id.end());
    plain.insert(plain.end(), reply.worker_id.begin(), reply.worker_id.end());
    append_le(plain, reply.port, 2);
    const std::string name = reply.name.substr(0, kMaxDiscoveryName);
    plain.push_back(static_cast<uint8_t>(name.size()));
    plain.insert(plain.end(), name.begin(), name.end());
    return seal(keys.reply, kReplyKind, plain);
}

std::optional<DiscoveryProbe> open_probe(const DiscoveryKeys& keys, std::span<const uint8_t> packet, PacketVerdict& why) {
    const auto plain = open(keys.probe, kProbeKind, packet, kProbeBytes, kProbeBytes, why);
    if (!plain) return std::nullopt;
    DiscoveryProbe p;
    std::memcpy(p.id.data(), plain->data(), 16);
    p.time_ms = static_cast<int64_t>(load_le(plain->data() + 16, 8));
    return p;
}

std::optional<DiscoveryReply> open_reply(const DiscoveryKeys& keys, std::span<const uint8_t> packet, PacketVerdict& why) {
    const auto plain = open(keys.reply, kReplyKind, packet, kReplyFixedBytes, kReplyFixedBytes + kMaxDiscoveryName, why);
    if (!plain) return std::nullopt;
    const uint8_t* p = plain->data();
    const size_t name_bytes = p[34];
    // Authentic, so written by a key holder; still checked, as any input is.
    if (kReplyFixedBytes + name_bytes != plain->size()) {
        why = PacketVerdict::kMalformed;
        return std::nullopt;
    }
    DiscoveryReply r;
    std::memcpy(r.probe_id.data(), p, 16);
    std::memcpy(r.worker_id.data(), p + 16, 16);
    r.port = static_cast<uint16_t>(load_le(p + 32, 2));
    r.name.assign(reinterpret_cast<const char*>(p + 35), name_bytes);
    for (char& c : r.name) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return r;
}

}  // namespace tessera
