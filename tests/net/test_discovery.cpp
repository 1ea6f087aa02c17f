// Keyed discovery's packets and the worker's gate, as hostile input: only the
// key's holders can make a probe or a reply that opens; every altered,
// truncated, oversized or foreign packet is refused with its reason, never an
// exception; a probe is answered once (a copy by another path is a
// duplicate, a later copy a replay), stale clocks and floods are dropped.
// (Real sockets are tested in network namespaces of their own,
// tests/apps/test_lan_discovery.cpp: a probe is a broadcast, and only our own
// namespaces are ever targets.)
#include "net/discovery_gate.h"
#include "net/discovery_packets.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <climits>

namespace tessera {
namespace {

WireKey key_of(uint8_t seed) {
    WireKey k;
    for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<uint8_t>(seed * 31 + i);
    return k;
}

TEST(DiscoveryPackets, OpenOnlyWithTheKeyAndAsTheirOwnKind) {
    const DiscoveryKeys keys = discovery_keys(key_of(1)), other = discovery_keys(key_of(2));
    const DiscoveryProbe probe{random_discovery_id(), 1700000000123};
    const auto sealed = seal_probe(keys, probe);
    PacketVerdict why;
    const auto opened = open_probe(keys, sealed, why);
    ASSERT_TRUE(opened);
    EXPECT_EQ(why, PacketVerdict::kOk);
    EXPECT_EQ(opened->id, probe.id);
    EXPECT_EQ(opened->time_ms, probe.time_ms);
    EXPECT_FALSE(open_probe(other, sealed, why));
    EXPECT_EQ(why, PacketVerdict::kUnauthenticated);
    EXPECT_FALSE(open_reply(keys, sealed, why)) << "a probe is not a reply";
    EXPECT_EQ(why, PacketVerdict::kMalformed);

    DiscoveryReply reply{probe.id, random_discovery_id(), 7000, std::string(100, 'n')};
    const auto r = seal_reply(keys, reply);
    const auto back = open_reply(keys, r, why);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->name, std::string(kMaxDiscoveryName, 'n')) << "names are cut to the limit";
    EXPECT_EQ(back->port, 7000);
    EXPECT_EQ(back->worker_id, reply.worker_id);
    // The kind byte is authenticated: a reply relabeled as a probe does not open.
    auto relabeled = r;
    relabeled[4] = 1;
    EXPECT_FALSE(open_probe(keys, relabeled, why));
    EXPECT_NE(why, PacketVerdict::kOk);
    // Two seals of one probe share no bytes after the header (fresh nonces).
    const auto again = seal_probe(keys, probe);
    EXPECT_NE(std::vector<uint8_t>(again.begin() + 8, again.end()), std::vector<uint8_t>(sealed.begin() + 8, sealed.end()));
}

TEST(DiscoveryPackets, EveryAlterationTruncationAndJunkIsRefused) {
    const DiscoveryKeys keys = discovery_keys(key_of(3));
    const auto sealed = seal_reply(keys, {random_discovery_id(), random_discovery_id(), 9999, "board"});
    PacketVerdict why;
    for (size_t i = 0; i < sealed.size(); ++i) {
        for (uint8_t bit : {uint8_t{1}, uint8_t{0x80}}) {
            auto p = sealed;
            p[i] ^= bit;
            EXPECT_FALSE(open_reply(keys, p, why)) << "byte " << i;
        }
    }
    for (size_t n = 0; n < sealed.size(); ++n) {
        EXPECT_FALSE(open_reply(keys, std::span<const uint8_t>(sealed.data(), n), why)) << n;
    }
    std::vector<uint8_t> big(kMaxDiscoveryPacket + 1, 0);
    EXPECT_FALSE(open_probe(keys, big, why));
    EXPECT_EQ(why, PacketVerdict::kOversized);
    Rng rng(5);
    for (int t = 0; t < 20000; ++t) {
        std::vector<uint8_t> junk(static_cast<uint32_t>(rng.next_u64()) % (kMaxDiscoveryPacket + 8));
        for (uint8_t& b : junk) b = static_cast<uint8_t>(static_cast<uint32_t>(rng.next_u64()));
        if (junk.size() >= 8 && t % 2 == 0) std::copy(sealed.begin(), sealed.begin() + 8, junk.begin());
        EXPECT_FALSE(open_probe(keys, junk, why));
        EXPECT_FALSE(open_reply(keys, junk, why));
    }
}

TEST(DiscoveryGate, AnswersOnceDropsStaleReplayedAndFloods) {
    DiscoveryGate gate(300000, 10.0, 5.0, 100);
    const int64_t now = 1700000000000;
    DiscoveryProbe p{random_discovery_id(), now - 1000};
    EXPECT_EQ(gate.admit(p, now), ProbeDecision::kAnswer);
    EXPECT_EQ(gate.admit(p, now + 10), ProbeDecision::kDuplicate);       // the same probe by another path
    EXPECT_EQ(gate.admit(p, now + kDuplicateMs), ProbeDecision::kReplayed);  // a recording played again
    for (int64_t t : {now - 300000, now + 300000, INT64_MIN, INT64_MAX, int64_t{0}}) {
        EXPECT_EQ(gate.admit({random_discovery_id(), t}, now), ProbeDecision::kStale) << t;
    }
    EXPECT_EQ(gate.admit({random_discovery_id(), now + 299000}, now), ProbeDecision::kAnswer) << "a clock ahead";
    // The burst: 5 answers at once in all (two given above), then 10 a second.
    int answered = 0, limited = 0;
    for (int i = 0; i < 50; ++i) {
        const ProbeDecision d = gate.admit({random_discovery_id(), now}, now);
        answered += d == ProbeDecision::kAnswer;
        limited += d == ProbeDecision::kRateLimited;
    }
    EXPECT_EQ(answered, 3);
    EXPECT_EQ(limited, 47);
    EXPECT_EQ(gate.admit({random_discovery_id(), now + 1000}, now + 1000), ProbeDecision::kAnswer) << "refilled";
    // Memory stays bounded: only the last 100 ids are remembered.
    DiscoveryGate small(300000, 1e9, 1e9, 100);
    const DiscoveryProbe first{random_discovery_id(), now};
    EXPECT_EQ(small.admit(first, now), ProbeDecision::kAnswer);
    for (int i = 0; i < 200; ++i) small.admit({random_discovery_id(), now}, now + 3000);
    EXPECT_EQ(small.admit(first, now + 3000), ProbeDecision::kAnswer) << "forgotten after 100 newer ids";
}

}  // namespace
}  // namespace tessera
