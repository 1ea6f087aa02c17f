// Frames and channels over real loopback TCP: round trips, and every way a
// peer can send something wrong (bad magic, other version, oversized claim,
// replayed or skipped sequence number, truncated body, stall, hang-up) ends in
// an Error naming the peer within the timeout, never a crash or a hang.
#include "net/channel.h"
#include "util/error.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <functional>

#include <chrono>
#include <thread>

namespace tessera {

using test::error_of;

namespace {

struct Pair {
    FrameChannel a;  // the connecting side
    TcpStream raw;   // the accepted side, for writing hand-made bytes
};

// A channel connected to a raw stream on loopback.
Pair connect_pair(ChannelLimits limits = {}) {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    TcpStream client = TcpStream::connect({"127.0.0.1", listener.port()}, 2000);
    TcpStream server = listener.accept(2000);
    return {FrameChannel(std::move(client), limits), std::move(server)};
}

void send_raw_header(TcpStream& s, const FrameHeader& h) {
    const FrameHeaderBytes b = encode_frame_header(h);
    s.write_all(b.data(), b.size(), 1000);
}

}  // namespace

TEST(Frame, HeaderRoundTripsAndIsChecked) {
    FrameHeader h;
    h.type = 7;
    h.sequence = 0x0102030405060708ull;
    h.length = 1234;
    h.flags = 1;
    const FrameHeader back = decode_frame_header(encode_frame_header(h), 4096, "peer");
    EXPECT_EQ(back.type, 7);
    EXPECT_EQ(back.sequence, h.sequence);
    EXPECT_EQ(back.length, 1234u);
    EXPECT_EQ(back.flags, 1u);
    FrameHeaderBytes bad = encode_frame_header(h);
    bad[0] ^= 1;
    EXPECT_NE(error_of([&] { decode_frame_header(bad, 4096, "peer"); }).find("magic"), std::string::npos);
    h.version = 9;
    EXPECT_NE(error_of([&] { decode_frame_header(encode_frame_header(h), 4096, "peer"); }).find("version 9"),
              std::string::npos);
    h.version = kFrameVersion;
    EXPECT_NE(error_of([&] { decode_frame_header(encode_frame_header(h), 1000, "peer"); }).find("exceeds"),
              std::string::npos);
}

TEST(HostPort, ParsesAndRefuses) {
    EXPECT_EQ(parse_host_port("10.0.0.2:9999").host, "10.0.0.2");
    EXPECT_EQ(parse_host_port("10.0.0.2:9999").port, 9999);
    EXPECT_EQ(parse_host_port("[::1]:80").host, "::1");
    EXPECT_EQ(parse_host_port(":7000").host, "");
    EXPECT_THROW(parse_host_port("localhost"), Error);
    EXPECT_THROW(parse_host_port("localhost:http"), Error);
    EXPECT_THROW(parse_host_port("localhost:70000"), Error);
}

TEST(Channel, FramesRoundTripInOrder) {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    std::thread echo([&] {
        FrameChannel server(listener.accept(2000), {});
        Frame f;
        for (int i = 0; i < 50; ++i) {
            server.recv(f);
            server.send(static_cast<uint16_t>(f.type + 1), f.payload);
        }
    });
    FrameChannel client(TcpStream::connect({"127.0.0.1", listener.port()}, 2000), {});
    Frame f;
    for (int i = 0; i < 50; ++i) {
        std::vector<uint8_t> payload(static_cast<size_t>(i * 997 % 70000));
        for (size_t j = 0; j < payload.size(); ++j) payload[j] = static_cast<uint8_t>(j * 31 + i);
        const std::vector<uint8_t> tail = {1, 2, 3};
        const std::span<const uint8_t> parts[] = {payload, tail};
        client.send(static_cast<uint16_t>(i), parts);
        client.recv(f);
        EXPECT_EQ(f.type, i + 1);
        EXPECT_EQ(f.sequence, static_cast<uint64_t>(i));
        payload.insert(payload.end(), tail.begin(), tail.end());
        EXPECT_EQ(f.payload, payload);
    }
    echo.join();
}

TEST(Channel, RefusesForgedFrames) {
    {
        Pair p = connect_pair();
        FrameHeader h;
        h.sequence = 1;  // 0 was due
        send_raw_header(p.raw, h);
        Frame f;
        EXPECT_NE(error_of([&] { p.a.recv(f); }).find("frame number 1 arrived where 0 was due"), std::string::npos);
    }
    {
        Pair p = connect_pair({1024, 2000});
        FrameHeader h;
        h.length = 0xFFFFFFF0u;  // refused before any allocation or read
        send_raw_header(p.raw, h);
        Frame f;
        EXPECT_NE(error_of([&] { p.a.recv(f); }).find("exceeds the limit of 1024"), std::string::npos);
        EXPECT_LT(f.payload.capacity(), 1024u);
    }
    {
        Pair p = connect_pair();
        FrameHeader h;
        h.flags = 1;  // sealed frame to a plain channel
        send_raw_header(p.raw, h);
        Frame f;
        EXPECT_NE(error_of([&] { p.a.recv(f); }).find("flags"), std::string::npos);
    }
}

TEST(Channel, StalledOrVanishedPeerIsAnErrorWithinTheTimeout) {
    {
        Pair p = connect_pair({1 << 20, 300});
        FrameHeader h;
        h.length = 100;
        send_raw_header(p.raw, h);  // ...and never the body
        Frame f;
        const auto start = std::chrono::steady_clock::now();
        const std::string e = error_of([&] { p.a.recv(f); });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_NE(e.find("missing after 300 ms"), std::string::npos) << e;
        EXPECT_LT(s, 2.0);
    }
    {
        Pair p = connect_pair();
        FrameHeader h;
        h.length = 100;
        send_raw_header(p.raw, h);
        p.raw.close();  // hang up mid-frame
        Frame f;
        EXPECT_NE(error_of([&] { p.a.recv(f); }).find("closed by the peer"), std::string::npos);
    }
}

TEST(Tcp, ConnectToAClosedPortFailsClearly) {
    uint16_t port = 0;
    {
        TcpListener l(parse_host_port("127.0.0.1:0"));
        port = l.port();
    }
    const std::string e = error_of([&] { TcpStream::connect({"127.0.0.1", port}, 1000); });
    EXPECT_NE(e.find("cannot connect"), std::string::npos) << e;
    EXPECT_NE(e.find(std::to_string(port)), std::string::npos) << e;
    EXPECT_THROW(TcpListener(parse_host_port("127.0.0.1:0")).accept(50), Error);
}

}  // namespace tessera
