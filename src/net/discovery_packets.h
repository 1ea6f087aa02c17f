// The packets of keyed discovery (`tessera worker --advertise`, `--discover`),
// sealed so that only holders of the cluster key can read, answer or forge
// them: a stranger on the network sees random bytes, not the model, not the
// workers' names or ports, and its probes get no answer at all.
//
//   header  (8)   "TSD1" | kind (1: probe, 2: reply) | 3 zero bytes
//   nonce   (24)  random (XChaCha20-Poly1305)
//   sealed        probe: probe id (16) | the root's clock, unix ms (8)
//                 reply: probe id (16) | worker id (16) | TCP port (2) |
//                        name length (1) | name (at most 64 bytes)
//   tag     (16)  over the header (associated data) and the sealed bytes
//
// Probes and replies are sealed with different keys derived from the
// cluster key, so a reply cannot be reflected as a probe. A reply names the
// probe it answers: a recorded reply is useless to a later search, and a
// replayed probe is caught by the worker's gate (discovery_gate.h).
#pragma once

#include "net/wire_key.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// Larger datagrams are dropped unread (a reply is at most 157 bytes).
constexpr size_t kMaxDiscoveryPacket = 256;
constexpr size_t kMaxDiscoveryName = 64;

struct DiscoveryKeys {
    std::array<uint8_t, 32> probe{}, reply{};
};

// Derived from the cluster key with their own labels (BLAKE2b, keyed).
DiscoveryKeys discovery_keys(const WireKey& key);

using DiscoveryId = std::array<uint8_t, 16>;
DiscoveryId random_discovery_id();
std::string discovery_id_hex(const DiscoveryId& id);

struct DiscoveryProbe {
    DiscoveryId id{};
    int64_t time_ms = 0;  // the root's clock when sent (unix epoch)
};

struct DiscoveryReply {
    DiscoveryId probe_id{};
    DiscoveryId worker_id{};  // random per worker process
    uint16_t port = 0;        // the worker's TCP port
    std::string name;         // its host name, cut to kMaxDiscoveryName
};

enum class PacketVerdict {
    kOk,
    kOversized,        // longer than kMaxDiscoveryPacket
    kMalformed,        // not a discovery packet of this version and kind
    kUnauthenticated,  // sealed with another key, or altered
};
const char* packet_verdict_name(PacketVerdict v);

std::vector<uint8_t> seal_probe(const DiscoveryKeys& keys, const DiscoveryProbe& probe);
std::vector<uint8_t> seal_reply(const DiscoveryKeys& keys, const DiscoveryReply& reply);

// Any bytes: a packet of the kind asked for, opened, or the verdict why not.
std::optional<DiscoveryProbe> open_probe(const DiscoveryKeys& keys, std::span<const uint8_t> packet, PacketVerdict& why);
std::optional<DiscoveryReply> open_reply(const DiscoveryKeys& keys, std::span<const uint8_t> packet, PacketVerdict& why);

}  // namespace tessera
