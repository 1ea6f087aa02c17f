#include "net/seal.h"

#include "util/error.h"

#include <openssl/evp.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

constexpr size_t kBlock = 64;  // ChaCha20's block
using FrameNonce = std::array<uint8_t, crypto_aead_chacha20poly1305_IETF_NPUBBYTES>;

// The 96-bit IETF nonce: four zero bytes, then the frame's sequence number.
// Each direction has its own key and numbers its frames from 0 without gaps,
// so a nonce never repeats under one key.
FrameNonce nonce_of(uint64_t sequence) {
    FrameNonce n{};
    for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(sequence >> (8 * i));
    return n;
}

// The primitives come from OpenSSL's libcrypto: its ChaCha20 and Poly1305
// dispatch at run time to AVX-512 (and NEON on ARM), about 2x and 3x
// libsodium 1.0.18's speed on this project's machines, and every sealed
// byte passes through both twice per sync (seal, then open). libsodium keeps
// the keys, the handshake and the constant-time compare.

// A ChaCha20 context under one key: writes the keystream of (nonce, first
// block counter) for n bytes, or XORs it into data.
class ChaCha20 {
public:
    ChaCha20() : ctx_(::EVP_CIPHER_CTX_new()) {
        if (ctx_ == nullptr) throw make_error("OpenSSL: no memory for a ChaCha20 context");
    }
    ~ChaCha20() { ::EVP_CIPHER_CTX_free(ctx_); }
    ChaCha20(const ChaCha20&) = delete;
    ChaCha20& operator=(const ChaCha20&) = delete;

    // data ^= keystream (in place); data all zero gives the keystream itself.
    void xor_stream(const std::array<uint8_t, 32>& key, uint64_t sequence, uint32_t counter, uint8_t* data,
                    size_t n) {
        apply(key, sequence, counter, data, data, n);
    }

    // out = in ^ keystream (in may be out).
    void apply(const std::array<uint8_t, 32>& key, uint64_t sequence, uint32_t counter, const uint8_t* in,
               uint8_t* out, size_t n) {
        // OpenSSL's 16-byte IV is the 32-bit block counter (little-endian), then the 96-bit nonce.
        uint8_t iv[16];
        for (int i = 0; i < 4; ++i) iv[i] = static_cast<uint8_t>(counter >> (8 * i));
        const FrameNonce nonce = nonce_of(sequence);
        std::memcpy(iv + 4, nonce.data(), nonce.size());
        if (::EVP_EncryptInit_ex2(ctx_, cipher(), key.data(), iv, nullptr) != 1) {
            throw make_error("OpenSSL: ChaCha20 failed to start");
        }
        while (n > 0) {
            // EVP counts lengths in int.
            const int step = static_cast<int>(std::min<size_t>(n, size_t{1} << 30));
            int written = 0;
            if (::EVP_EncryptUpdate(ctx_, out, &written, in, step) != 1 || written != step) {
                throw make_error("OpenSSL: ChaCha20 failed");
            }
            in += step;
            out += step;
            n -= static_cast<size_t>(step);
        }
    }

private:
    EVP_CIPHER_CTX* ctx_;

    static const EVP_CIPHER* cipher() {
        static EVP_CIPHER* const c = ::EVP_CIPHER_fetch(nullptr, "ChaCha20", nullptr);
        if (c == nullptr) throw make_error("OpenSSL's libcrypto has no ChaCha20");
        return c;
    }
};

// Most of sealing's time is the ChaCha20 keystream, and the keystream depends
// only on the key and the frame's number, not on its bytes. A tensor-parallel
// step is a strict exchange (each side waits for the other), so each side
// computes the keystream of its next frames while it waits, and sealing or
// opening on the critical path is left with an XOR and Poly1305: the
// ChaCha20-Poly1305 construction of RFC 8439, built here from its stream and
// MAC so that it can be split in time. A test checks the bytes against
// libsodium's AEAD.
class Keystream {
public:
    ~Keystream() { wipe(); }

    // Computes the keystream of frame `sequence` for `bytes` payload bytes
    // (rounded up to whole blocks), unless it is already there.
    void prepare(const std::array<uint8_t, 32>& key, uint64_t sequence, size_t bytes) {
        bytes = (bytes + kBlock - 1) / kBlock * kBlock;
        if (sequence == sequence_ && bytes <= bytes_) return;
        // The keystream is written over the last one (never zeroed first: on
        // a sync's critical path, zeroing 16 KiB twice cost ~1 us); only what
        // a shorter stream leaves behind is wiped.
        if (stream_.size() > kBlock + bytes) ::sodium_memzero(stream_.data() + kBlock + bytes, stream_.size() - kBlock - bytes);
        stream_.resize(kBlock + bytes);
        chacha_.apply(key, sequence, 0, zeros(kBlock + bytes), stream_.data(), stream_.size());
        sequence_ = sequence;
        bytes_ = bytes;
    }

    // XORs `data` with frame `sequence`'s keystream (from the prepared bytes
    // where they cover it, the rest computed now) and writes its Poly1305 key.
    void apply(const std::array<uint8_t, 32>& key, uint64_t sequence, uint8_t* data, size_t n,
               uint8_t poly_key[32]) {
        size_t ready = 0;
        if (sequence == sequence_) {
            std::memcpy(poly_key, stream_.data(), 32);
            ready = std::min(n, bytes_);
            const uint8_t* ks = stream_.data() + kBlock;
            for (size_t i = 0; i < ready; ++i) data[i] ^= ks[i];
        } else {
            uint8_t block0[kBlock] = {};
            chacha_.xor_stream(key, sequence, 0, block0, sizeof block0);
            std::memcpy(poly_key, block0, 32);
            ::sodium_memzero(block0, sizeof block0);
        }
        if (ready < n) {
            // `ready` is whole blocks (or all of n); the payload's block i uses counter 1 + i.
            chacha_.xor_stream(key, sequence, static_cast<uint32_t>(1 + ready / kBlock), data + ready, n - ready);
        }
    }

private:
    // n zero bytes to encrypt into a keystream (n <= kMaxAhead + kBlock, as prepare asks).
    static const uint8_t* zeros(size_t n);

    ChaCha20 chacha_;
    std::vector<uint8_t> stream_;  // block 0 (the Poly1305 key), then the payload's keystream
    uint64_t sequence_ = ~uint64_t{0};
    size_t bytes_ = 0;

    void wipe() {
        if (!stream_.empty()) ::sodium_memzero(stream_.data(), stream_.size());
        sequence_ = ~uint64_t{0};
        bytes_ = 0;
    }
};

// RFC 8439's tag: Poly1305 over AD, padding, ciphertext, padding, and both
// lengths. One context per direction, since sending and receiving may run
// on different threads.
class Poly1305 {
public:
    Poly1305() {
        static EVP_MAC* const mac = ::EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
        if (mac == nullptr) throw make_error("OpenSSL's libcrypto has no Poly1305");
        ctx_ = ::EVP_MAC_CTX_new(mac);
        if (ctx_ == nullptr) throw make_error("OpenSSL: no memory for a Poly1305 context");
    }
    ~Poly1305() { ::EVP_MAC_CTX_free(ctx_); }
    Poly1305(const Poly1305&) = delete;
    Poly1305& operator=(const Poly1305&) = delete;

    void tag(const uint8_t poly_key[32], std::span<const uint8_t> ad, const uint8_t* ct, size_t n, uint8_t out[16]) {
        static constexpr uint8_t kZeros[16] = {};
        uint8_t lengths[16];
        const uint64_t ad_len = ad.size(), ct_len = n;
        for (int i = 0; i < 8; ++i) {
            lengths[i] = static_cast<uint8_t>(ad_len >> (8 * i));
            lengths[8 + i] = static_cast<uint8_t>(ct_len >> (8 * i));
        }
        size_t written = 0;
        const bool ok = ::EVP_MAC_init(ctx_, poly_key, 32, nullptr) == 1 &&
                        ::EVP_MAC_update(ctx_, ad.data(), ad.size()) == 1 &&
                        ::EVP_MAC_update(ctx_, kZeros, (16 - ad.size() % 16) % 16) == 1 &&
                        ::EVP_MAC_update(ctx_, ct, n) == 1 &&
                        ::EVP_MAC_update(ctx_, kZeros, (16 - n % 16) % 16) == 1 &&
                        ::EVP_MAC_update(ctx_, lengths, sizeof lengths) == 1 &&
                        ::EVP_MAC_final(ctx_, out, &written, 16) == 1 && written == 16;
        if (!ok) throw make_error("OpenSSL: Poly1305 failed");
    }

private:
    EVP_MAC_CTX* ctx_ = nullptr;
};

// Keystream prepared ahead is capped: a frame far larger than a step's (a
// weight slice) is rare, and its keystream would be computed in vain when the
// next frame is small.
constexpr size_t kMaxAhead = 64 << 10;

const uint8_t* Keystream::zeros(size_t n) {
    static const std::vector<uint8_t> z(kMaxAhead + kBlock, 0);
    if (n > z.size()) throw make_error("internal: a keystream of {} bytes prepared ahead", n);
    return z.data();
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

    // The next frame each way is guessed to be as long as the last one.
    void prepare_send(uint64_t next_send) override {
        send_stream_.prepare(keys_.send, next_send, std::min(last_send_, kMaxAhead));
    }
    void prepare_recv(uint64_t next_recv) override {
        recv_stream_.prepare(keys_.recv, next_recv, std::min(last_recv_, kMaxAhead));
    }

    void seal(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) override {
        const size_t n = body.size() - kSealTagBytes;
        uint8_t poly_key[32];
        send_stream_.apply(keys_.send, header.sequence, body.data(), n, poly_key);
        send_mac_.tag(poly_key, header_bytes, body.data(), n, body.data() + n);
        ::sodium_memzero(poly_key, sizeof poly_key);
        last_send_ = n;
    }

    void open(const FrameHeader& header, std::span<const uint8_t> header_bytes, std::span<uint8_t> body) override {
        const size_t n = body.size() - kSealTagBytes;
        // The tag is checked before anything is decrypted, so a forged frame
        // never reaches the XOR.
        uint8_t poly_key[32], tag[16];
        recv_stream_.apply(keys_.recv, header.sequence, nullptr, 0, poly_key);
        recv_mac_.tag(poly_key, header_bytes, body.data(), n, tag);
        ::sodium_memzero(poly_key, sizeof poly_key);
        if (::crypto_verify_16(tag, body.data() + n) != 0) {
            throw make_error("{}: frame {} failed authentication (forged, corrupted, or from another session or key); "
                             "closing the connection", peer_, header.sequence);
        }
        recv_stream_.apply(keys_.recv, header.sequence, body.data(), n, poly_key);
        ::sodium_memzero(poly_key, sizeof poly_key);
        last_recv_ = n;
    }

private:
    SessionKeys keys_;
    std::string peer_;
    Keystream send_stream_, recv_stream_;
    Poly1305 send_mac_, recv_mac_;
    size_t last_send_ = 0, last_recv_ = 0;
};

}  // namespace

std::unique_ptr<FrameCodec> make_sealing_codec(const SessionKeys& keys, std::string peer) {
    return std::make_unique<SealingCodec>(keys, std::move(peer));
}

}  // namespace tessera
