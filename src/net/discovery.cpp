#include "net/discovery.h"

#include "util/error.h"
#include "util/timer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

namespace tessera {

namespace {

constexpr const char* kGroup4 = "239.255.84.83";
constexpr const char* kGroup6 = "ff02::5453:4450";
constexpr int kRescanMs = 5000;      // interfaces that came up since are joined
constexpr int kSummaryMs = 10000;    // at most one log line of drops this often
constexpr int kProbeEveryMs = 300;   // a root probes again this often while it waits

int64_t unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

struct Interface4 {
    unsigned index = 0;
    in_addr address{};
    std::optional<in_addr> broadcast;
    bool multicast = false;
};

// Up, not loopback: the interfaces a probe can leave by. IPv6 ones are those
// with a link-local address (multicast to ff02:: needs one).
void list_interfaces(std::vector<Interface4>& v4, std::vector<unsigned>& v6) {
    v4.clear();
    v6.clear();
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return;
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
        if (a->ifa_addr == nullptr || (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
        const unsigned index = ::if_nametoindex(a->ifa_name);
        if (index == 0) continue;
        if (a->ifa_addr->sa_family == AF_INET) {
            Interface4 i;
            i.index = index;
            i.address = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
            if ((a->ifa_flags & IFF_BROADCAST) != 0 && a->ifa_broadaddr != nullptr &&
                a->ifa_broadaddr->sa_family == AF_INET) {
                i.broadcast = reinterpret_cast<const sockaddr_in*>(a->ifa_broadaddr)->sin_addr;
            }
            i.multicast = (a->ifa_flags & IFF_MULTICAST) != 0;
            v4.push_back(i);
        } else if (a->ifa_addr->sa_family == AF_INET6 && (a->ifa_flags & IFF_MULTICAST) != 0) {
            const in6_addr& address = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr;
            if (IN6_IS_ADDR_LINKLOCAL(&address) && std::find(v6.begin(), v6.end(), index) == v6.end()) v6.push_back(index);
        }
    }
    ::freeifaddrs(list);
}

int udp_socket(int family) {
    return ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

void set_int(int fd, int level, int option, int value) { ::setsockopt(fd, level, option, &value, sizeof value); }

in_addr group4() {
    in_addr a{};
    ::inet_pton(AF_INET, kGroup4, &a);
    return a;
}

in6_addr group6() {
    in6_addr a{};
    ::inet_pton(AF_INET6, kGroup6, &a);
    return a;
}

// The numeric host of a datagram's source: an IPv6 link-local address with
// its interface (fe80::1%eth0), so that a TCP connection to it can be made.
std::string host_of(const sockaddr_storage& from) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (from.ss_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(from).sin_addr, text, sizeof text);
        return text;
    }
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(from);
    ::inet_ntop(AF_INET6, &a6.sin6_addr, text, sizeof text);
    std::string host = text;
    char name[IF_NAMESIZE] = {};
    if (IN6_IS_ADDR_LINKLOCAL(&a6.sin6_addr) && a6.sin6_scope_id != 0 && ::if_indextoname(a6.sin6_scope_id, name) != nullptr) {
        host += std::string("%") + name;
    }
    return host;
}

// Reads one datagram into `buffer`: at most kMaxDiscoveryPacket + 1 of its
// bytes, so a longer one is still too long there (and opened as oversized);
// false when none is waiting.
bool receive(int fd, std::vector<uint8_t>& buffer, sockaddr_storage& from, socklen_t& from_len) {
    buffer.resize(kMaxDiscoveryPacket + 1);
    from_len = sizeof from;
    const ssize_t n = ::recvfrom(fd, buffer.data(), buffer.size(), MSG_TRUNC, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return false;
    buffer.resize(std::min(static_cast<size_t>(n), buffer.size()));
    return true;
}

void count(DiscoveryCounters& c, PacketVerdict v) {
    switch (v) {
        case PacketVerdict::kOversized: ++c.oversized; break;
        case PacketVerdict::kMalformed: ++c.malformed; break;
        case PacketVerdict::kUnauthenticated: ++c.unauthenticated; break;
        case PacketVerdict::kOk: break;
    }
}

}  // namespace

std::string describe_counters(const DiscoveryCounters& c) {
    std::string out = fmt::format("answered {}", c.answered);
    const std::pair<const char*, uint64_t> drops[] = {{"oversized", c.oversized}, {"malformed", c.malformed},
                                                      {"unauthenticated", c.unauthenticated}, {"stale", c.stale},
                                                      {"replayed", c.replayed}, {"over the rate", c.rate_limited}};
    std::string dropped;
    for (const auto& [what, n] : drops) {
        if (n != 0) dropped += fmt::format("{}{} {}", dropped.empty() ? "" : ", ", n, what);
    }
    if (!dropped.empty()) out += "; dropped " + dropped;
    return out;
}

DiscoveryAdvertiser::DiscoveryAdvertiser(const WireKey& key, uint16_t tcp_port, uint16_t udp_port, std::string name,
                                         std::function<void(const std::string&)> log)
    : keys_(discovery_keys(key)), tcp_port_(tcp_port), name_(std::move(name)), log_(std::move(log)),
      worker_id_(random_discovery_id()) {
    fd4_ = udp_socket(AF_INET);
    if (fd4_ < 0) throw make_error("discovery: no UDP socket: {}", std::strerror(errno));
    // Several workers of one host may advertise (each gets every broadcast
    // and multicast probe).
    set_int(fd4_, SOL_SOCKET, SO_REUSEADDR, 1);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(udp_port);
    if (::bind(fd4_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
        const int e = errno;
        ::close(fd4_);
        throw make_error("discovery: cannot listen on UDP port {}: {}", udp_port, std::strerror(e));
    }
    fd6_ = udp_socket(AF_INET6);
    if (fd6_ >= 0) {
        set_int(fd6_, IPPROTO_IPV6, IPV6_V6ONLY, 1);
        set_int(fd6_, SOL_SOCKET, SO_REUSEADDR, 1);
        sockaddr_in6 any6{};
        any6.sin6_family = AF_INET6;
        any6.sin6_port = htons(udp_port);
        any6.sin6_addr = in6addr_any;
        if (::bind(fd6_, reinterpret_cast<sockaddr*>(&any6), sizeof any6) != 0) {
            ::close(fd6_);
            fd6_ = -1;  // no IPv6 here: IPv4 alone
        }
    }
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        ::close(fd4_);
        if (fd6_ >= 0) ::close(fd6_);
        throw make_error("discovery: no pipe: {}", std::strerror(errno));
    }
    thread_ = std::thread([this] { loop(); });
}

DiscoveryAdvertiser::~DiscoveryAdvertiser() {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
    thread_.join();
    ::close(fd4_);
    if (fd6_ >= 0) ::close(fd6_);
    ::close(wake_[0]);
    ::close(wake_[1]);
}

DiscoveryCounters DiscoveryAdvertiser::counters() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counters_;
}

void DiscoveryAdvertiser::handle(int fd, std::span<const uint8_t> packet, const void* from, unsigned from_len) {
    PacketVerdict why = PacketVerdict::kOk;
    const std::optional<DiscoveryProbe> probe = open_probe(keys_, packet, why);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!probe) {
        count(counters_, why);
        return;
    }
    switch (gate_.admit(*probe, unix_ms())) {
        case ProbeDecision::kDuplicate: ++counters_.duplicates; return;
        case ProbeDecision::kStale: ++counters_.stale; return;
        case ProbeDecision::kReplayed: ++counters_.replayed; return;
        case ProbeDecision::kRateLimited: ++counters_.rate_limited; return;
        case ProbeDecision::kAnswer: break;
    }
    DiscoveryReply reply;
    reply.probe_id = probe->id;
    reply.worker_id = worker_id_;
    reply.port = tcp_port_;
    reply.name = name_;
    const std::vector<uint8_t> bytes = seal_reply(keys_, reply);
    ::sendto(fd, bytes.data(), bytes.size(), 0, static_cast<const sockaddr*>(from), from_len);
    ++counters_.answered;
}

void DiscoveryAdvertiser::loop() {
    std::set<unsigned> joined4, joined6;
    std::vector<Interface4> v4;
    std::vector<unsigned> v6;
    double rescanned = -1e9, summarized = now_seconds();
    uint64_t last_dropped = 0;
    std::vector<uint8_t> buffer;
    for (;;) {
        const double now = now_seconds();
        if ((now - rescanned) * 1e3 >= kRescanMs) {
            rescanned = now;
            list_interfaces(v4, v6);
            for (const Interface4& i : v4) {
                if (!i.multicast || joined4.count(i.index) != 0) continue;
                ip_mreqn m{};
                m.imr_multiaddr = group4();
                m.imr_ifindex = static_cast<int>(i.index);
                if (::setsockopt(fd4_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) == 0 || errno == EADDRINUSE) {
                    joined4.insert(i.index);
                }
            }
            for (unsigned index : v6) {
                if (fd6_ < 0 || joined6.count(index) != 0) continue;
                ipv6_mreq m{};
                m.ipv6mr_multiaddr = group6();
                m.ipv6mr_interface = index;
                if (::setsockopt(fd6_, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m) == 0 || errno == EADDRINUSE) {
                    joined6.insert(index);
                }
            }
        }
        if (log_ && (now - summarized) * 1e3 >= kSummaryMs) {
            summarized = now;
            const DiscoveryCounters c = counters();
            if (c.dropped() != last_dropped) {
                last_dropped = c.dropped();
                log_("discovery: " + describe_counters(c));
            }
        }
        pollfd fds[3] = {{wake_[0], POLLIN, 0}, {fd4_, POLLIN, 0}, {fd6_, POLLIN, 0}};
        const int n = ::poll(fds, fd6_ >= 0 ? 3 : 2, 1000);
        if (n < 0 && errno != EINTR) return;
        if (n <= 0) continue;
        if (fds[0].revents != 0) return;
        for (int k = 1; k < (fd6_ >= 0 ? 3 : 2); ++k) {
            if ((fds[k].revents & POLLIN) == 0) continue;
            // A bounded batch per wake: a flood on one socket cannot starve
            // the other or the rescans.
            for (int batch = 0; batch < 256; ++batch) {
                sockaddr_storage from{};
                socklen_t from_len = 0;
                if (!receive(fds[k].fd, buffer, from, from_len)) break;
                handle(fds[k].fd, buffer, &from, from_len);
            }
        }
    }
}

std::vector<DiscoveredNode> discover_nodes(const WireKey& key, uint16_t udp_port, int timeout_ms,
                                           DiscoveryCounters* counters) {
    const DiscoveryKeys keys = discovery_keys(key);
    const int fd4 = udp_socket(AF_INET);
    if (fd4 < 0) throw make_error("discovery: no UDP socket: {}", std::strerror(errno));
    set_int(fd4, SOL_SOCKET, SO_BROADCAST, 1);
    set_int(fd4, IPPROTO_IP, IP_MULTICAST_TTL, 1);
    const int fd6 = udp_socket(AF_INET6);
    if (fd6 >= 0) {
        set_int(fd6, IPPROTO_IPV6, IPV6_V6ONLY, 1);
        set_int(fd6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, 1);
    }
    std::vector<Interface4> v4;
    std::vector<unsigned> v6;
    list_interfaces(v4, v6);
    if (v4.empty() && v6.empty()) {
        ::close(fd4);
        if (fd6 >= 0) ::close(fd6);
        throw make_error("discovery: this machine has no network interface up but loopback, so there is no one to "
                         "probe (name the workers with --workers instead)");
    }
    std::map<DiscoveryId, double> sent;  // probe id -> when sent
    DiscoveryCounters c;
    std::vector<DiscoveredNode> found;
    const double start = now_seconds();
    double probed = -1e9;
    std::vector<uint8_t> buffer;
    auto send_to = [](int fd, const std::vector<uint8_t>& bytes, const void* to, socklen_t len) {
        ::sendto(fd, bytes.data(), bytes.size(), 0, static_cast<const sockaddr*>(to), len);  // best effort
    };
    for (;;) {
        const double now = now_seconds();
        const double left_ms = timeout_ms - (now - start) * 1e3;
        if (left_ms <= 0) break;
        if ((now - probed) * 1e3 >= kProbeEveryMs) {
            probed = now;
            DiscoveryProbe probe{random_discovery_id(), unix_ms()};
            sent[probe.id] = now;
            const std::vector<uint8_t> bytes = seal_probe(keys, probe);
            sockaddr_in to{};
            to.sin_family = AF_INET;
            to.sin_port = htons(udp_port);
            to.sin_addr.s_addr = htonl(INADDR_BROADCAST);
            send_to(fd4, bytes, &to, sizeof to);
            for (const Interface4& i : v4) {
                if (i.broadcast) {
                    to.sin_addr = *i.broadcast;
                    send_to(fd4, bytes, &to, sizeof to);
                }
                if (i.multicast) {
                    ip_mreqn m{};
                    m.imr_ifindex = static_cast<int>(i.index);
                    ::setsockopt(fd4, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m);
                    to.sin_addr = group4();
                    send_to(fd4, bytes, &to, sizeof to);
                }
            }
            for (unsigned index : v6) {
                if (fd6 < 0) break;
                set_int(fd6, IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(index));
                sockaddr_in6 to6{};
                to6.sin6_family = AF_INET6;
                to6.sin6_port = htons(udp_port);
                to6.sin6_addr = group6();
                to6.sin6_scope_id = index;
                send_to(fd6, bytes, &to6, sizeof to6);
            }
        }
        pollfd fds[2] = {{fd4, POLLIN, 0}, {fd6, POLLIN, 0}};
        const int wait_ms = static_cast<int>(std::max(1.0, std::min(left_ms, static_cast<double>(kProbeEveryMs))));
        if (::poll(fds, fd6 >= 0 ? 2 : 1, wait_ms) <= 0) continue;
        for (const pollfd& p : fds) {
            if (p.fd < 0 || (p.revents & POLLIN) == 0) continue;
            for (int batch = 0; batch < 256; ++batch) {
                sockaddr_storage from{};
                socklen_t from_len = 0;
                if (!receive(p.fd, buffer, from, from_len)) break;
                PacketVerdict why = PacketVerdict::kOk;
                const std::optional<DiscoveryReply> reply = open_reply(keys, buffer, why);
                if (!reply) {
                    count(c, why);
                    continue;
                }
                const auto probe = sent.find(reply->probe_id);
                if (probe == sent.end()) {
                    ++c.replayed;  // an answer to no probe of this search
                    continue;
                }
                ++c.answered;
                DiscoveredNode node{{host_of(from), reply->port}, reply->name, reply->worker_id,
                                    (now_seconds() - probe->second) * 1e3};
                const bool v4_answer = from.ss_family == AF_INET;
                auto same = std::find_if(found.begin(), found.end(), [&](const DiscoveredNode& f) {
                    return f.id == node.id || (f.address.host == node.address.host && f.address.port == node.address.port);
                });
                if (same == found.end()) {
                    found.push_back(node);
                } else if (v4_answer && same->address.host.find(':') != std::string::npos) {
                    *same = node;  // the IPv4 address of a worker first heard over IPv6
                }
            }
        }
    }
    ::close(fd4);
    if (fd6 >= 0) ::close(fd6);
    std::sort(found.begin(), found.end(), [](const DiscoveredNode& a, const DiscoveredNode& b) {
        return std::make_pair(a.address.host, a.address.port) < std::make_pair(b.address.host, b.address.port);
    });
    if (counters != nullptr) *counters = c;
    return found;
}

}  // namespace tessera
