// Frame channels switched to a shared-memory link (net/shm_link.h): random
// frames of every size, larger than the rings, cross in both directions
// unchanged; a peer that closes is noticed at once, one that stalls within
// the timeout (reading and writing); a segment with another nonce or a
// foreign name is refused; nothing is left in /dev/shm.
#include "net/channel.h"
#include "net/handshake.h"
#include "net/wire_key.h"
#include "net/shm_link.h"
#include "util/error.h"
#include "util/rng.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

namespace tessera {

using test::error_of;

namespace {

struct LinkedPair {
    FrameChannel a;  // the connecting side: opens the segment
    FrameChannel b;  // the accepted side: creates it
};

// Two channels on loopback TCP, both then switched to one shared-memory link
// with rings of ring_bytes.
LinkedPair linked_pair(size_t ring_bytes, ChannelLimits limits = {}) {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    TcpStream client = TcpStream::connect({"127.0.0.1", listener.port()}, 2000);
    LinkedPair p{FrameChannel(std::move(client), limits), FrameChannel(listener.accept(2000), limits)};
    std::unique_ptr<ShmLink> created = ShmLink::create(ring_bytes);
    std::unique_ptr<ShmLink> opened = ShmLink::open(created->name(), created->nonce_hex());
    created->unlink();
    p.a.use_shared_memory(std::move(opened));
    p.b.use_shared_memory(std::move(created));
    return p;
}

std::vector<uint8_t> random_bytes(Rng& rng, size_t n) {
    std::vector<uint8_t> v(n);
    for (uint8_t& x : v) x = static_cast<uint8_t>(rng.next_u64());
    return v;
}

}  // namespace

// Peers that proved the key seal every TCP frame; once on their shared
// memory (the segment only they can open) frames are not sealed again, and
// both sides still count as authenticated.
TEST(ShmLink, AuthenticatedPeersStopSealingOnlyOnSharedMemory) {
    const WireKey key = random_key();
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    FrameChannel a(TcpStream::connect({"127.0.0.1", listener.port()}, 2000), {});
    FrameChannel b(listener.accept(2000), {});
    std::thread server([&] { authenticate_as_server(b, &key, 2000, 1 << 20); });
    authenticate_as_client(a, &key, 2000);
    server.join();
    ASSERT_TRUE(a.sealed() && a.frames_sealed() && b.sealed() && b.frames_sealed());
    const std::vector<uint8_t> hello = {1, 2, 3};
    Frame f;
    a.send(7, hello);
    b.recv(f);
    EXPECT_EQ(f.payload, hello);
    std::unique_ptr<ShmLink> created = ShmLink::create(4096);
    std::unique_ptr<ShmLink> opened = ShmLink::open(created->name(), created->nonce_hex());
    created->unlink();
    a.use_shared_memory(std::move(opened));
    b.use_shared_memory(std::move(created));
    EXPECT_TRUE(a.sealed() && b.sealed());
    EXPECT_FALSE(a.frames_sealed() || b.frames_sealed());
    for (uint16_t type = 0; type < 50; ++type) {
        const std::vector<uint8_t> payload(type * 40u, static_cast<uint8_t>(type));  // within one ring: one thread sends and receives
        a.send(type, payload);
        b.recv(f);
        EXPECT_EQ(f.type, type);
        EXPECT_EQ(f.payload, payload);
        b.send(type, payload);
        a.recv(f);
        EXPECT_EQ(f.payload, payload);
    }
}

TEST(ShmLink, RandomFramesCrossBothWaysUnchanged) {
    LinkedPair p = linked_pair(4096);
    ASSERT_TRUE(p.a.on_shared_memory());
    ASSERT_TRUE(p.a.peer_is_loopback());
    // Sizes from empty to many times the ring, so writes wrap and block on a
    // full ring while the reader drains it.
    Rng rng(7);
    std::vector<std::vector<uint8_t>> frames;
    for (int i = 0; i < 200; ++i) {
        const size_t n = i % 10 == 0 ? 0 : (i % 7 == 0 ? 50000 + rng.next_u64() % 20000 : rng.next_u64() % 5000);
        frames.push_back(random_bytes(rng, n));
    }
    // b echoes every frame back reversed, with its type + 1.
    std::thread echo([&] {
        Frame f;
        for (size_t i = 0; i < frames.size(); ++i) {
            p.b.recv(f);
            std::vector<uint8_t> back(f.payload.rbegin(), f.payload.rend());
            p.b.send(static_cast<uint16_t>(f.type + 1), back);
        }
    });
    // a sends from one thread and receives on another, so both directions
    // carry data at once.
    std::thread sender([&] {
        for (size_t i = 0; i < frames.size(); ++i) p.a.send(static_cast<uint16_t>(i % 100), frames[i]);
    });
    Frame f;
    for (size_t i = 0; i < frames.size(); ++i) {
        p.a.recv(f);
        EXPECT_EQ(f.type, i % 100 + 1);
        EXPECT_TRUE(std::equal(f.payload.begin(), f.payload.end(), frames[i].rbegin(), frames[i].rend()))
            << "frame " << i;
    }
    sender.join();
    echo.join();
}

TEST(ShmLink, ClosedPeerIsNoticedAtOnceAndStalledPeerWithinTheTimeout) {
    ChannelLimits limits;
    limits.io_timeout_ms = 300;
    {
        LinkedPair p = linked_pair(4096, limits);
        // A frame sent before the peer went away is still delivered.
        p.b.send(3, std::vector<uint8_t>(10, 1));
        p.b.close();
        Frame f;
        p.a.recv(f);
        EXPECT_EQ(f.type, 3);
        const auto start = std::chrono::steady_clock::now();
        EXPECT_NE(error_of([&] { p.a.recv(f, 5000); }).find("connection closed by the peer"), std::string::npos);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
        EXPECT_TRUE(p.a.poll(5000));  // end of stream counts as readable, so a caller goes on to the error
    }
    {
        LinkedPair p = linked_pair(4096, limits);
        Frame f;
        const auto start = std::chrono::steady_clock::now();
        EXPECT_NE(error_of([&] { p.a.recv(f); }).find("no data for 300 ms"), std::string::npos);
        EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(290));
        EXPECT_FALSE(p.a.poll(50));
        // A frame larger than the ring that nobody reads.
        EXPECT_NE(error_of([&] { p.a.send(1, std::vector<uint8_t>(100000)); }).find("peer stopped reading"),
                  std::string::npos);
    }
}

TEST(ShmLink, OnlyTheOfferedSegmentIsOpenedAndNoneIsLeftBehind) {
    std::string name;
    {
        std::unique_ptr<ShmLink> link = ShmLink::create(1000);
        name = link->name();
        EXPECT_TRUE(std::filesystem::exists("/dev/shm" + name));
        std::string other_nonce = link->nonce_hex();
        other_nonce[0] = other_nonce[0] == '0' ? '1' : '0';
        EXPECT_NE(error_of([&] { ShmLink::open(name, other_nonce); }).find("not the segment offered"), std::string::npos);
        EXPECT_NE(error_of([&] { ShmLink::open("/etc-passwd", link->nonce_hex()); }).find("not one of ours"),
                  std::string::npos);
        EXPECT_NE(error_of([&] { ShmLink::open("/tessera-x/../y", link->nonce_hex()); }).find("not one of ours"),
                  std::string::npos);
        EXPECT_NE(error_of([&] { ShmLink::open("/tessera-none", link->nonce_hex()); }).find("/tessera-none"),
                  std::string::npos);
    }
    // The creator removes a segment nobody opened.
    EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name));
}

}  // namespace tessera
