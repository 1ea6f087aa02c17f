#include "net/shm_link.h"

#include "util/error.h"
#include "util/timer.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

namespace tessera {

// One direction's control block. head and tail only grow (bytes written and
// read so far); each lives on its own cache line, as does each side's
// sleeping flag and the counter it sleeps on (a futex word).
struct ShmLink::Ring {
    alignas(64) std::atomic<uint64_t> head;  // written by the producer
    alignas(64) std::atomic<uint64_t> tail;  // written by the consumer
    alignas(64) std::atomic<uint32_t> data_seq;  // bumped after every write
    std::atomic<uint32_t> data_waiting;          // the consumer sleeps on data_seq
    alignas(64) std::atomic<uint32_t> space_seq;  // bumped after every read
    std::atomic<uint32_t> space_waiting;          // the producer sleeps on space_seq
};

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the rings need lock-free atomics: they are shared between processes");

constexpr uint64_t kMagic = 0x314d48535353454eULL;  // "NESSSHM1"
constexpr size_t kHeaderBytes = 4096;              // header, then the two rings' control blocks
constexpr size_t kRingOffset[2] = {256, 1024};
constexpr int kSleepSliceMs = 10;  // a sleeping side re-checks the peer's connection this often

struct SegmentHeader {
    uint64_t magic;
    uint64_t ring_bytes;
    uint8_t nonce[16];
};

std::string hex(const uint8_t* bytes, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", bytes[i]);
    return s;
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int ms) {
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    // Not FUTEX_PRIVATE: the word is shared with another process.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// After the switch nothing travels on the TCP connection, so any byte, end of
// stream or error there means the peer has gone.
bool peer_gone(const TcpStream& tcp) {
    pollfd p{tcp.fd(), static_cast<short>(POLLIN | POLLRDHUP), 0};
    return ::poll(&p, 1, 0) > 0;
}

enum class Wait { kReady, kTimeout, kPeerGone };

// Waits until ready(): spins up to spin_us, then sleeps on `seq` in slices,
// checking the peer's connection after each.
template <class Ready>
Wait wait_for(Ready ready, std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiting, int spin_us, int timeout_ms,
              const TcpStream& tcp) {
    if (ready()) return Wait::kReady;
    if (spin_us > 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
        do {
            // On a busy machine the peer we wait for may need this core.
            std::this_thread::yield();
            if (ready()) return Wait::kReady;
        } while (std::chrono::steady_clock::now() < until);
    }
    const int64_t deadline = timeout_ms < 0 ? -1 : steady_ms() + timeout_ms;
    for (;;) {
        // Read the counter before the last check: a write after the check
        // bumps it, and the futex then refuses to sleep.
        const uint32_t observed = seq.load();
        waiting.store(1);
        if (ready()) {
            waiting.store(0);
            return Wait::kReady;
        }
        int slice = kSleepSliceMs;
        if (deadline >= 0) slice = static_cast<int>(std::clamp<int64_t>(deadline - steady_ms(), 0, kSleepSliceMs));
        if (slice > 0) futex_wait(seq, observed, slice);
        waiting.store(0);
        if (ready()) return Wait::kReady;
        if (peer_gone(tcp)) return Wait::kPeerGone;
        if (deadline >= 0 && steady_ms() >= deadline) return Wait::kTimeout;
    }
}

}  // namespace

ShmLink::ShmLink(void* base, size_t bytes, size_t ring_bytes, bool creator, std::string name, std::string nonce_hex)
    : base_(base), bytes_(bytes), creator_(creator), name_(std::move(name)), nonce_hex_(std::move(nonce_hex)),
      ring_bytes_(ring_bytes) {
    auto* b = static_cast<uint8_t*>(base);
    Ring* rings[2] = {reinterpret_cast<Ring*>(b + kRingOffset[0]), reinterpret_cast<Ring*>(b + kRingOffset[1])};
    uint8_t* data[2] = {b + kHeaderBytes, b + kHeaderBytes + ring_bytes};
    const int out = creator ? 1 : 0;
    out_ = rings[out];
    out_data_ = data[out];
    in_ = rings[1 - out];
    in_data_ = data[1 - out];
}

ShmLink::~ShmLink() {
    if (creator_) unlink();
    ::munmap(base_, bytes_);
}

void ShmLink::unlink() {
    if (linked_) ::shm_unlink(name_.c_str());
    linked_ = false;
}

std::unique_ptr<ShmLink> ShmLink::create(size_t ring_bytes) {
    size_t ring = 4096;
    while (ring < ring_bytes) ring *= 2;
    std::random_device random;
    uint8_t nonce[16];
    for (uint8_t& byte : nonce) byte = static_cast<uint8_t>(random());
    const std::string name = fmt::format("/tessera-{}-{}", ::getpid(), hex(nonce, 8));
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) throw make_error("shared memory {}: {}", name, std::strerror(errno));
    const size_t bytes = kHeaderBytes + 2 * ring;
    void* base = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
        base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const int error = errno;
    ::close(fd);
    if (base == MAP_FAILED) {
        ::shm_unlink(name.c_str());
        throw make_error("shared memory {} of {} bytes: {}", name, bytes, std::strerror(error));
    }
    // A fresh mapping is zero: both rings empty, nobody sleeping.
    auto* header = static_cast<SegmentHeader*>(base);
    header->ring_bytes = ring;
    std::memcpy(header->nonce, nonce, sizeof nonce);
    std::atomic_thread_fence(std::memory_order_release);
    header->magic = kMagic;
    return std::unique_ptr<ShmLink>(new ShmLink(base, bytes, ring, true, name, hex(nonce, sizeof nonce)));
}

std::unique_ptr<ShmLink> ShmLink::open(const std::string& name, const std::string& nonce_hex) {
    // Only names this code creates: one component under /dev/shm.
    if (name.rfind("/tessera-", 0) != 0 || name.find('/', 1) != std::string::npos || name.size() > 64) {
        throw make_error("shared memory name '{}' is not one of ours", name);
    }
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) throw make_error("shared memory {}: {}", name, std::strerror(errno));
    struct stat st {};
    void* base = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > kHeaderBytes) {
        base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    ::close(fd);
    if (base == MAP_FAILED) throw make_error("shared memory {}: cannot map it", name);
    const auto bytes = static_cast<size_t>(st.st_size);
    const auto* header = static_cast<const SegmentHeader*>(base);
    const uint64_t ring = header->ring_bytes;
    if (header->magic != kMagic || ring < 4096 || (ring & (ring - 1)) != 0 || kHeaderBytes + 2 * ring != bytes ||
        hex(header->nonce, sizeof header->nonce) != nonce_hex) {
        ::munmap(base, bytes);
        throw make_error("shared memory {} is not the segment offered (size or nonce differ)", name);
    }
    return std::unique_ptr<ShmLink>(new ShmLink(base, bytes, ring, false, name, nonce_hex));
}

void ShmLink::write_all(const void* data, size_t n, int timeout_ms, const TcpStream& tcp) {
    const auto* p = static_cast<const uint8_t*>(data);
    const uint64_t mask = ring_bytes_ - 1;
    const int64_t deadline = steady_ms() + timeout_ms;
    while (n > 0) {
        const uint64_t head = out_->head.load(std::memory_order_relaxed);  // only we write it
        // The tail is the peer's to write: check it before using it, so a
        // forged one is an error, not a write past the ring.
        const uint64_t used = head - out_->tail.load(std::memory_order_acquire);
        if (used > ring_bytes_) throw make_error("{}: shared-memory ring corrupted (read index out of range)", tcp.peer());
        const uint64_t free = ring_bytes_ - used;
        if (free == 0) {
            const auto has_space = [&] { return out_->tail.load() != head - ring_bytes_; };
            const int left = static_cast<int>(std::max<int64_t>(0, deadline - steady_ms()));
            const Wait w = wait_for(has_space, out_->space_seq, out_->space_waiting, spin_us_, left, tcp);
            if (w == Wait::kPeerGone) throw make_error("{}: connection closed by the peer", tcp.peer());
            if (w == Wait::kTimeout) {
                throw make_error("{}: peer stopped reading (write timed out after {} ms)", tcp.peer(), timeout_ms);
            }
            continue;
        }
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, free));
        const size_t at = static_cast<size_t>(head & mask);
        const size_t first = std::min(chunk, ring_bytes_ - at);
        std::memcpy(out_data_ + at, p, first);
        std::memcpy(out_data_, p + first, chunk - first);
        out_->head.store(head + chunk);  // seq_cst: ordered before the look at data_waiting
        out_->data_seq.fetch_add(1);
        if (out_->data_waiting.load() != 0) futex_wake(out_->data_seq);
        p += chunk;
        n -= chunk;
    }
}

void ShmLink::read_exact(void* data, size_t n, int timeout_ms, const TcpStream& tcp) {
    auto* p = static_cast<uint8_t*>(data);
    const uint64_t mask = ring_bytes_ - 1;
    const int64_t deadline = steady_ms() + timeout_ms;
    while (n > 0) {
        const uint64_t tail = in_->tail.load(std::memory_order_relaxed);  // only we write it
        const uint64_t ready = in_->head.load(std::memory_order_acquire) - tail;
        if (ready == 0) {
            const auto has_data = [&] { return in_->head.load() != tail; };
            const int left = static_cast<int>(std::max<int64_t>(0, deadline - steady_ms()));
            const Wait w = wait_for(has_data, in_->data_seq, in_->data_waiting, spin_us_, left, tcp);
            if (w == Wait::kPeerGone) throw make_error("{}: connection closed by the peer", tcp.peer());
            if (w == Wait::kTimeout) {
                throw make_error("{}: no data for {} ms (peer stalled or unreachable)", tcp.peer(), timeout_ms);
            }
            continue;
        }
        if (ready > ring_bytes_) {
            throw make_error("{}: shared-memory ring corrupted (write index out of range)", tcp.peer());
        }
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, ready));
        const size_t at = static_cast<size_t>(tail & mask);
        const size_t first = std::min(chunk, ring_bytes_ - at);
        std::memcpy(p, in_data_ + at, first);
        std::memcpy(p + first, in_data_, chunk - first);
        in_->tail.store(tail + chunk);
        in_->space_seq.fetch_add(1);
        if (in_->space_waiting.load() != 0) futex_wake(in_->space_seq);
        p += chunk;
        n -= chunk;
    }
}

bool ShmLink::wait_readable(int timeout_ms, const TcpStream& tcp) {
    const uint64_t tail = in_->tail.load(std::memory_order_relaxed);
    const auto has_data = [&] { return in_->head.load() != tail; };
    return wait_for(has_data, in_->data_seq, in_->data_waiting, spin_us_, timeout_ms, tcp) != Wait::kTimeout;
}

}  // namespace tessera
