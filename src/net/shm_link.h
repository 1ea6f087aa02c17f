// A shared-memory link between two processes on one host: two single-producer
// single-consumer byte rings (one per direction) in a POSIX shared-memory
// segment, which a FrameChannel can carry its frames through instead of its
// TCP connection (DESIGN.md, "Wire": same-host ranks may use a shared-memory
// ring). On loopback a TCP round trip costs about 20 us of system calls and
// wake-ups, and a tensor-parallel token makes dozens of them; through the ring
// a waiting reader sees the bytes as soon as they are stored.
//
// The TCP connection stays open beside the link and carries nothing more: the
// kernel closing it is how a dead peer is noticed, and a link read or write
// that makes no progress for its timeout names a stalled one, as on TCP.
//
// Setup: one side create()s the segment and sends its name and nonce over the
// TCP connection; the other open()s it, which checks the nonce (so a segment
// of the same name on another machine, or a stale one, is never taken for
// it). Each side then uses its own direction: the creator writes ring 1 and
// reads ring 0, the opener the reverse.
#pragma once

#include "net/tcp.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

class ShmLink {
public:
    ~ShmLink();
    ShmLink(const ShmLink&) = delete;
    ShmLink& operator=(const ShmLink&) = delete;

    // A new segment with two rings of `ring_bytes` each (rounded up to a power
    // of two). Throws an Error if shared memory is unavailable.
    static std::unique_ptr<ShmLink> create(size_t ring_bytes);
    // The segment another process created; throws an Error if it is missing,
    // of another size or holds another nonce.
    static std::unique_ptr<ShmLink> open(const std::string& name, const std::string& nonce_hex);

    const std::string& name() const { return name_; }
    const std::string& nonce_hex() const { return nonce_hex_; }
    // Removes the segment's name (the mapping stays valid); both sides do
    // this once the link is in use, so nothing is left in /dev/shm.
    void unlink();

    // Before sleeping, a waiting side checks for progress for up to `us`
    // microseconds (as TcpStream::set_spin_before_sleep).
    void set_spin_before_sleep(int us) { spin_us_ = us; }

    // Writes or reads exactly n bytes, each within timeout_ms of progress.
    // `tcp` is the connection the link came with: its end of stream (or any
    // byte on it) means the peer has gone. Errors name tcp.peer().
    void write_all(const void* data, size_t n, int timeout_ms, const TcpStream& tcp);
    void read_exact(void* data, size_t n, int timeout_ms, const TcpStream& tcp);
    // True when bytes are ready (or the peer has gone) within timeout_ms.
    bool wait_readable(int timeout_ms, const TcpStream& tcp);

private:
    ShmLink(void* base, size_t bytes, size_t ring_bytes, bool creator, std::string name, std::string nonce_hex);

    void* base_ = nullptr;
    size_t bytes_ = 0;
    bool creator_ = false;
    std::string name_, nonce_hex_;
    struct Ring;
    Ring* in_ = nullptr;   // the peer writes, we read
    Ring* out_ = nullptr;  // we write, the peer reads
    uint8_t* in_data_ = nullptr;
    uint8_t* out_data_ = nullptr;
    size_t ring_bytes_ = 0;
    int spin_us_ = 0;
    bool linked_ = true;
};

}  // namespace tessera
