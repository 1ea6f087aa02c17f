// TCP endpoints with a deadline on every operation: connect, accept, and each
// read or write. A peer that stalls or dies surfaces as an Error naming its
// address within the timeout, never as a hang. Streams set TCP_NODELAY: the
// hot path sends small frames (one activation row) whose latency is the cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct HostPort {
    std::string host;
    uint16_t port = 0;
    std::string str() const;
};

// Parses "HOST:PORT", "[V6ADDR]:PORT" or ":PORT" (all interfaces); a clear
// Error otherwise.
HostPort parse_host_port(const std::string& text);
// Parses "HOST:PORT,HOST:PORT,..." (empty items skipped).
std::vector<HostPort> parse_host_port_list(const std::string& text);
// The inverse: "HOST:PORT,HOST:PORT".
std::string format_host_port_list(const std::vector<HostPort>& nodes);

class TcpStream {
public:
    TcpStream() = default;
    ~TcpStream();
    TcpStream(TcpStream&& other) noexcept;
    TcpStream& operator=(TcpStream&& other) noexcept;
    TcpStream(const TcpStream&) = delete;
    TcpStream& operator=(const TcpStream&) = delete;

    // Connects within timeout_ms (name resolution included).
    static TcpStream connect(const HostPort& address, int timeout_ms);

    // Writes or reads exactly n bytes, all of them within timeout_ms (a
    // deadline for the whole call, not for the time between bytes); throws
    // an Error naming the peer on timeout, reset or end of stream.
    void write_all(const void* data, size_t n, int timeout_ms);
    void read_exact(void* data, size_t n, int timeout_ms);
    // Reads what is available now (at most n bytes; 0 at end of stream).
    size_t read_some(void* data, size_t n);
    // Half-closes the stream: the peer reads end of stream after our bytes.
    void shutdown_write();
    // True when bytes (or end of stream) are ready within timeout_ms.
    bool wait_readable(int timeout_ms);

    // Before sleeping in poll() for incoming bytes, check for them for up to
    // `us` microseconds (0: never). On the hot path of a tensor-parallel
    // layer the answer comes within tens of microseconds, and a poll() sleep
    // plus wake-up costs about as much again on every one of a token's
    // dozens of round trips.
    void set_spin_before_sleep(int us) { spin_us_ = us; }

    // Asks for socket buffers of at least this many bytes each way (the
    // kernel caps them at net.core.{r,w}mem_max, doubled).
    void set_buffer_bytes(int bytes);

    bool is_open() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    const std::string& peer() const { return peer_; }
    // Whether the peer's address is on this host's loopback (127/8, ::1,
    // ::ffff:127/104).
    bool peer_is_loopback() const;
    void close();

private:
    TcpStream(int fd, std::string peer);
    // Spins (up to spin_us_) until bytes are ready; true if they are.
    bool spin_until_readable();

    int fd_ = -1;
    std::string peer_;
    int spin_us_ = 0;

    friend class TcpListener;
};

class TcpListener {
public:
    // Binds and listens (port 0 picks a free port: see port()).
    explicit TcpListener(const HostPort& address);
    ~TcpListener();
    TcpListener(const TcpListener&) = delete;
    TcpListener& operator=(const TcpListener&) = delete;

    uint16_t port() const { return port_; }
    // Waits up to timeout_ms (negative: forever) for a connection.
    TcpStream accept(int timeout_ms);

private:
    int fd_ = -1;
    uint16_t port_ = 0;
    std::string name_;
};

}  // namespace tessera
