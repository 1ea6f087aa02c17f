// The key handshake over real loopback TCP: equal keys give sealed channels
// both ways; a wrong key, or a keyed end meeting a plain one, is refused on
// both sides with a message saying what to do, within a second.
#include "net/handshake.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tessera {

using test::error_of;

namespace {

struct Outcome {
    std::string client_error, server_error;
    std::unique_ptr<FrameChannel> client, server;
    double seconds = 0;
};

Outcome shake(const WireKey* client_key, const WireKey* server_key) {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    Outcome o;
    const auto start = std::chrono::steady_clock::now();
    std::thread server([&] {
        o.server = std::make_unique<FrameChannel>(listener.accept(2000), ChannelLimits{1 << 20, 2000});
        o.server_error = error_of([&] { authenticate_as_server(*o.server, server_key, 2000, 1 << 20); });
    });
    o.client = std::make_unique<FrameChannel>(TcpStream::connect({"127.0.0.1", listener.port()}, 2000),
                                              ChannelLimits{1 << 20, 2000});
    o.client_error = error_of([&] { authenticate_as_client(*o.client, client_key, 2000); });
    server.join();
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return o;
}

}  // namespace

TEST(Handshake, EqualKeysSealBothDirections) {
    const WireKey key = random_key();
    Outcome o = shake(&key, &key);
    ASSERT_EQ(o.client_error, test::kNoError);
    ASSERT_EQ(o.server_error, test::kNoError);
    EXPECT_TRUE(o.client->sealed());
    EXPECT_TRUE(o.server->sealed());
    const std::vector<uint8_t> hello = {1, 2, 3};
    o.client->send(5, hello);
    o.server->send(6, hello);
    Frame f;
    o.server->recv(f);
    EXPECT_EQ(f.payload, hello);
    o.client->recv(f);
    EXPECT_EQ(f.payload, hello);
}

TEST(Handshake, WrongKeyIsRefusedOnBothSidesWithinASecond) {
    const WireKey a = random_key(), b = random_key();
    const Outcome o = shake(&a, &b);
    EXPECT_NE(o.client_error.find("holds a different key"), std::string::npos) << o.client_error;
    EXPECT_NE(o.server_error.find("refused our proof of the key"), std::string::npos) << o.server_error;
    EXPECT_LT(o.seconds, 1.0);
}

TEST(Handshake, KeyedAndPlainEndsNeverTalk) {
    const WireKey key = random_key();
    Outcome o = shake(nullptr, &key);
    EXPECT_NE(o.client_error.find("requires a key"), std::string::npos) << o.client_error;
    EXPECT_NE(o.server_error.find("has no key"), std::string::npos) << o.server_error;
    o = shake(&key, nullptr);
    EXPECT_NE(o.client_error.find("runs without a key"), std::string::npos) << o.client_error;
    EXPECT_NE(o.server_error.find("uses a key, but this node has none"), std::string::npos) << o.server_error;
    o = shake(nullptr, nullptr);
    EXPECT_EQ(o.client_error, test::kNoError);
    EXPECT_EQ(o.server_error, test::kNoError);
    EXPECT_FALSE(o.client->sealed());
}

// A peer that sends nothing, or not a tessera hello, is dropped within the
// handshake's deadline, and before it has proved the key it may send only
// small frames.
TEST(Handshake, SilentOrForeignPeersAreDroppedWithinTheDeadline) {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    TcpStream silent = TcpStream::connect({"127.0.0.1", listener.port()}, 2000);
    FrameChannel server(listener.accept(2000), ChannelLimits{1 << 20, 300});
    const auto start = std::chrono::steady_clock::now();
    const WireKey key = random_key();
    EXPECT_NE(error_of([&] { authenticate_as_server(server, &key, 300, 1 << 20); }).find("no data for"),
              std::string::npos);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);

    FrameChannel client(TcpStream::connect({"127.0.0.1", listener.port()}, 2000), ChannelLimits{1 << 20, 2000});
    FrameChannel server2(listener.accept(2000), ChannelLimits{1 << 20, 2000});
    const std::vector<uint8_t> big(kUnauthenticatedMaxPayload + 1, 0);
    client.send(static_cast<uint16_t>(AuthFrame::kHello), big);
    EXPECT_NE(error_of([&] { authenticate_as_server(server2, &key, 2000, 1 << 20); }).find("exceeds the limit"),
              std::string::npos);
}

}  // namespace tessera
