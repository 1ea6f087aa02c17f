// Sealed frames over real loopback TCP, with the bytes between the two ends
// in the test's hands: an intact frame opens; a flipped payload or header
// byte, a frame from another session, a truncated frame, a replayed or
// reordered one each end in an Error naming the peer.
#include "net/seal.h"
#include "net/wire_key.h"

#include "test_errors.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <random>

namespace tessera {

using test::error_of;

namespace {

// sender -> [raw_in ... test ... raw_out] -> receiver
struct SealedPath {
    std::unique_ptr<FrameChannel> sender, receiver;
    TcpStream raw_in, raw_out;
};

SessionKeys keys_of(uint8_t seed, bool swap) {
    SessionKeys k;
    for (size_t i = 0; i < 32; ++i) {
        k.send[i] = static_cast<uint8_t>(seed + i);
        k.recv[i] = static_cast<uint8_t>(seed * 7 + i);
    }
    if (swap) std::swap(k.send, k.recv);
    return k;
}

SealedPath make_path(uint8_t sender_seed = 1, uint8_t receiver_seed = 1) {
    SealedPath p;
    TcpListener l1(parse_host_port("127.0.0.1:0")), l2(parse_host_port("127.0.0.1:0"));
    p.sender = std::make_unique<FrameChannel>(TcpStream::connect({"127.0.0.1", l1.port()}, 2000), ChannelLimits{1 << 20, 1000});
    p.raw_in = l1.accept(2000);
    p.receiver = std::make_unique<FrameChannel>(TcpStream::connect({"127.0.0.1", l2.port()}, 2000), ChannelLimits{1 << 20, 1000});
    p.raw_out = l2.accept(2000);
    p.sender->set_codec(make_sealing_codec(keys_of(sender_seed, false), "sender"));
    p.receiver->set_codec(make_sealing_codec(keys_of(receiver_seed, true), "receiver"));
    return p;
}

// The wire bytes of the next frame the sender sent.
std::vector<uint8_t> take_frame(SealedPath& p) {
    std::vector<uint8_t> bytes(kFrameHeaderBytes);
    p.raw_in.read_exact(bytes.data(), bytes.size(), 1000);
    FrameHeaderBytes hb;
    std::copy(bytes.begin(), bytes.end(), hb.begin());
    const FrameHeader h = decode_frame_header(hb, 1 << 20, "test");
    bytes.resize(kFrameHeaderBytes + h.length);
    p.raw_in.read_exact(bytes.data() + kFrameHeaderBytes, h.length, 1000);
    return bytes;
}

void give(SealedPath& p, const std::vector<uint8_t>& bytes) { p.raw_out.write_all(bytes.data(), bytes.size(), 1000); }

const std::vector<uint8_t> kPayload = {'t', 'h', 'e', ' ', 'n', 'o', 'r', 'm', 'e', 'd', ' ', 'r', 'o', 'w', 's'};

}  // namespace

TEST(Seal, IntactFramesOpenAndHideTheirPayload) {
    SealedPath p = make_path();
    for (int i = 0; i < 3; ++i) {
        p.sender->send(7, kPayload);
        const std::vector<uint8_t> wire = take_frame(p);
        EXPECT_EQ(wire.size(), kFrameHeaderBytes + kPayload.size() + kSealTagBytes);
        EXPECT_EQ(std::search(wire.begin(), wire.end(), kPayload.begin(), kPayload.begin() + 8), wire.end())
            << "plaintext on the wire";
        give(p, wire);
        Frame f;
        p.receiver->recv(f);
        EXPECT_EQ(f.payload, kPayload);
        EXPECT_EQ(f.type, 7);
    }
    p.sender->send(8, std::span<const uint8_t>());  // empty payloads are sealed too
    give(p, take_frame(p));
    Frame f;
    p.receiver->recv(f);
    EXPECT_TRUE(f.payload.empty());
}

TEST(Seal, TamperedFramesFailAuthentication) {
    const auto expect_refused = [](const std::function<void(std::vector<uint8_t>&)>& tamper, const char* what,
                                   uint8_t receiver_seed = 1) {
        SealedPath p = make_path(1, receiver_seed);
        p.sender->send(7, kPayload);
        std::vector<uint8_t> wire = take_frame(p);
        tamper(wire);
        give(p, wire);
        Frame f;
        const std::string e = error_of([&] { p.receiver->recv(f); });
        EXPECT_NE(e.find("receiver: frame 0 failed authentication"), std::string::npos) << what << ": " << e;
    };
    expect_refused([](std::vector<uint8_t>& w) { w[kFrameHeaderBytes + 3] ^= 1; }, "payload byte");
    expect_refused([](std::vector<uint8_t>& w) { w.back() ^= 0x80; }, "tag byte");
    expect_refused([](std::vector<uint8_t>& w) { w[6] ^= 1; }, "header type");
    expect_refused([](std::vector<uint8_t>&) {}, "another session's keys", 2);
    expect_refused(
        [](std::vector<uint8_t>& w) {
            // Cut the frame short and fix its length: still refused.
            w.resize(w.size() - 4);
            const uint32_t len = static_cast<uint32_t>(w.size() - kFrameHeaderBytes);
            for (int i = 0; i < 4; ++i) w[16 + i] = static_cast<uint8_t>(len >> (8 * i));
        },
        "truncated");
}

TEST(Seal, ReplayedOrReorderedFramesAreRefused) {
    {
        SealedPath p = make_path();
        p.sender->send(7, kPayload);
        const std::vector<uint8_t> first = take_frame(p);
        give(p, first);
        Frame f;
        p.receiver->recv(f);
        std::vector<uint8_t> replay = first;
        replay[8] = 1;  // renumbered as the next frame: the nonce no longer matches
        give(p, replay);
        EXPECT_NE(error_of([&] { p.receiver->recv(f); }).find("failed authentication"), std::string::npos);
    }
    {
        SealedPath p = make_path();
        p.sender->send(7, kPayload);
        p.sender->send(7, kPayload);
        const std::vector<uint8_t> first = take_frame(p), second = take_frame(p);
        give(p, second);
        Frame f;
        EXPECT_NE(error_of([&] { p.receiver->recv(f); }).find("frame number 1 arrived where 0 was due"),
                  std::string::npos);
    }
}

// The sealing codec computes ChaCha20-Poly1305 in two parts (the keystream
// ahead of time, XOR and tag on the frame), so its bytes are checked against
// libsodium's one-call AEAD, whatever was prepared: nothing, the right frame
// with a shorter, equal or longer guess of its length, or another frame.
TEST(Seal, KeystreamPreparedAheadGivesLibsodiumsBytes) {
    const SessionKeys sender = keys_of(3, false), receiver = keys_of(3, true);
    auto seal_codec = make_sealing_codec(sender, "sender");
    auto open_codec = make_sealing_codec(receiver, "receiver");
    std::mt19937 rng(11);
    const size_t sizes[] = {0, 1, 15, 63, 64, 65, 127, 1000, 4096, 9000, 70000, 200000};
    uint64_t sequence = 0;
    for (const size_t n : sizes) {
        for (int how = 0; how < 5; ++how) {
            std::vector<uint8_t> payload(n);
            for (auto& b : payload) b = static_cast<uint8_t>(rng());
            FrameHeader header;
            header.type = 9;
            header.sequence = sequence;
            header.length = static_cast<uint32_t>(n + kSealTagBytes);
            header.flags = kSealedFlag;
            const FrameHeaderBytes hb = encode_frame_header(header);

            std::vector<uint8_t> expected(n + kSealTagBytes);
            uint8_t nonce[12] = {};
            for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(sequence >> (8 * i));
            unsigned long long tag_len = 0;
            crypto_aead_chacha20poly1305_ietf_encrypt_detached(expected.data(), expected.data() + n, &tag_len,
                                                               payload.data(), n, hb.data(), hb.size(), nullptr,
                                                               nonce, sender.send.data());
            // The codecs guess the next frame's length from the last one; a
            // frame of another length or number before this one moves it.
            if (how == 1) {
                seal_codec->prepare_send(sequence);
                seal_codec->prepare_recv(sequence);
                open_codec->prepare_send(sequence);
                open_codec->prepare_recv(sequence);
            } else if (how >= 2) {
                // Seal and open a frame of length n / 2, n or 2n + 100 first
                // (number sequence), then this one as number sequence + 1.
                const size_t guess = how == 2 ? n / 2 : how == 3 ? n : 2 * n + 100;
                std::vector<uint8_t> warm(guess + kSealTagBytes);
                FrameHeader wh = header;
                wh.length = static_cast<uint32_t>(warm.size());
                const FrameHeaderBytes whb = encode_frame_header(wh);
                seal_codec->seal(wh, whb, warm);
                open_codec->open(wh, whb, warm);
                ++sequence;
                header.sequence = sequence;
                const FrameHeaderBytes hb2 = encode_frame_header(header);
                for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(sequence >> (8 * i));
                crypto_aead_chacha20poly1305_ietf_encrypt_detached(expected.data(), expected.data() + n, &tag_len,
                                                                   payload.data(), n, hb2.data(), hb2.size(), nullptr,
                                                                   nonce, sender.send.data());
                // how == 4: prepared for the wrong frame number.
                const uint64_t prepared = how == 4 ? sequence + 5 : sequence;
                seal_codec->prepare_send(prepared);
                seal_codec->prepare_recv(prepared);
                open_codec->prepare_send(prepared);
                open_codec->prepare_recv(prepared);
            }
            const FrameHeaderBytes final_hb = encode_frame_header(header);
            std::vector<uint8_t> body(payload);
            body.resize(n + kSealTagBytes);
            seal_codec->seal(header, final_hb, body);
            ASSERT_EQ(body, expected) << "size " << n << ", case " << how;
            open_codec->open(header, final_hb, body);
            body.resize(n);
            ASSERT_EQ(body, payload) << "size " << n << ", case " << how;
            ++sequence;
        }
    }
}

// A prepared keystream must not let a forged frame through or decrypt it.
TEST(Seal, PreparedOpenStillRefusesForgedFrames) {
    auto seal_codec = make_sealing_codec(keys_of(4, false), "sender");
    auto open_codec = make_sealing_codec(keys_of(4, true), "receiver");
    std::vector<uint8_t> body(1000 + kSealTagBytes, 0x5a);
    FrameHeader header;
    header.length = static_cast<uint32_t>(body.size());
    header.flags = kSealedFlag;
    const FrameHeaderBytes hb = encode_frame_header(header);
    open_codec->prepare_recv(0);
    seal_codec->seal(header, hb, body);
    body[500] ^= 4;
    const std::vector<uint8_t> forged = body;
    EXPECT_NE(error_of([&] { open_codec->open(header, hb, body); }).find("frame 0 failed authentication"),
              std::string::npos);
    EXPECT_EQ(body, forged) << "a forged frame was decrypted in place";
}

}  // namespace tessera
