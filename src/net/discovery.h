// Keyed discovery on the local network: a worker started with --advertise
// answers the probes of roots holding the same cluster key; `--discover`
// sends probes and collects the answers. Probes go to every interface as
// IPv4 broadcast (the subnet's and 255.255.255.255), IPv4 multicast
// (239.255.84.83, TTL 1) and IPv6 link-local multicast (ff02::5453:4450 on
// each interface), so a network that drops one kind still carries another;
// the worker answers the probe's sender directly. Packets are sealed
// (discovery_packets.h): a stranger's probe gets no answer, and one who
// listens learns nothing but that datagrams pass. Whatever arrives (junk,
// replays, floods, oversized datagrams) is dropped and counted, never more.
#pragma once

#include "net/discovery_gate.h"
#include "net/discovery_packets.h"
#include "net/tcp.h"
#include "net/wire_key.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {

// The UDP port of discovery (the workers' default TCP port has the same number).
constexpr uint16_t kDiscoveryPort = 9999;

struct DiscoveryCounters {
    uint64_t answered = 0;
    uint64_t oversized = 0, malformed = 0, unauthenticated = 0;  // dropped unread or unopened
    uint64_t stale = 0, replayed = 0, rate_limited = 0;          // authentic, dropped by the gate
    uint64_t duplicates = 0;  // a probe again by another path (not counted as dropped)
    uint64_t dropped() const { return oversized + malformed + unauthenticated + stale + replayed + rate_limited; }
};

// "answered 3; dropped 12 malformed, 2 replayed" (only the non-zero ones).
std::string describe_counters(const DiscoveryCounters& c);

// A worker's side: a thread answering probes until destroyed. Joins the
// multicast groups on every interface, again as interfaces come up.
class DiscoveryAdvertiser {
public:
    DiscoveryAdvertiser(const WireKey& key, uint16_t tcp_port, uint16_t udp_port, std::string name,
                        std::function<void(const std::string&)> log);
    ~DiscoveryAdvertiser();
    DiscoveryAdvertiser(const DiscoveryAdvertiser&) = delete;
    DiscoveryAdvertiser& operator=(const DiscoveryAdvertiser&) = delete;

    DiscoveryCounters counters() const;
    const DiscoveryId& worker_id() const { return worker_id_; }

private:
    void loop();
    void handle(int fd, std::span<const uint8_t> packet, const void* from, unsigned from_len);

    DiscoveryKeys keys_;
    uint16_t tcp_port_;
    std::string name_;
    std::function<void(const std::string&)> log_;
    DiscoveryId worker_id_;
    int fd4_ = -1, fd6_ = -1;
    int wake_[2] = {-1, -1};
    DiscoveryGate gate_;
    mutable std::mutex mutex_;
    DiscoveryCounters counters_;
    std::thread thread_;
};

struct DiscoveredNode {
    HostPort address;    // the answer's source address (an IPv6 link-local one with its interface) and TCP port
    std::string name;    // the worker's host name
    DiscoveryId id{};
    double reply_ms = 0; // from the first probe to its answer
};

// A root's side: probes every few hundred ms for timeout_ms and returns the
// workers that answered, each once (by worker id and by address), in address
// order; IPv4 answers are preferred over IPv6 ones from the same worker.
// `counters` (optional) gets the answers dropped (not sealed with this key,
// malformed, or naming a probe this search did not send).
std::vector<DiscoveredNode> discover_nodes(const WireKey& key, uint16_t udp_port, int timeout_ms,
                                           DiscoveryCounters* counters = nullptr);

}  // namespace tessera
