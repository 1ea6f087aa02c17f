#include "net/seal.h"

#include "util/error.h"

#include <sodium.h>

#include <cstring>

namespace tessera {

namespace {

// The 96-bit IETF nonce: four zero bytes, then the frame's sequence number.
// Each direction has its own key and numbers its frames from 0 without gaps,
// so a nonce never repeats under one key.
std::array<uint8_t, crypto_aead_chacha20poly1305_IETF_NPUBBYTES> nonce_of(uint64_t sequence) {
    std::array<uint8_t, crypto_aead_chacha20poly1305_IETF_NPUBBYTES> n{};
    for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(sequence >> (8 * i));
    return n;
}

class SealingCodec final : public FrameCodec {
public:
    SealingCodec(const SessionKeys& keys, std::string peer) : keys_(keys), peer_(std::move(peer)) {
        static_assert(crypto_aead_chacha20poly1305_IETF_ABYTES == kSealTagBytes);
        if (::sodium_init() < 0) throw make_error("libsodium failed to initialize");
    }
    ~SealingCodec() override { ::sodium_memzero(&keys_, sizeof keys_); }

    uint32_t overhead() const override { return kSealTagBytes; }
    uint32_t flags() const override { return kSealedFlag; }

    void seal(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) override {
        const size_t n = body.size() - kSealTagBytes;
        const auto nonce = nonce_of(header.sequence);
        unsigned long long tag_len = 0;
        ::crypto_aead_chacha20poly1305_ietf_encrypt_detached(body.data(), body.data() + n, &tag_len, body.data(), n,
                                                              header_bytes.data(), header_bytes.size(), nullptr,
                                                              nonce.data(), keys_.send.data());
    }

    void open(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) override {
        const size_t n = body.size() - kSealTagBytes;
        const auto nonce = nonce_of(header.sequence);
        if (::crypto_aead_chacha20poly1305_ietf_decrypt_detached(body.data(), nullptr, body.data(), n,
                                                                  body.data() + n, header_bytes.data(),
                                                                  header_bytes.size(), nonce.data(),
                                                                  keys_.recv.data()) != 0) {
            throw make_error("{}: frame {} failed authentication (forged, corrupted, or from another session or key); "
                             "closing the connection", peer_, header.sequence);
        }
    }

private:
    SessionKeys keys_;
    std::string peer_;
};

}  // namespace

std::unique_ptr<FrameCodec> make_sealing_codec(const SessionKeys& keys, std::string peer) {
    return std::make_unique<SealingCodec>(keys, std::move(peer));
}

}  // namespace tessera
