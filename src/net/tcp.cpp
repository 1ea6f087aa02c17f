#include "net/tcp.h"

#include "util/error.h"
#include "util/timer.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace tessera {

namespace {

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// Waits for `events` on fd until the deadline; false on timeout.
bool poll_until(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        const int64_t left = deadline_ms < 0 ? -1 : deadline_ms - steady_ms();
        if (deadline_ms >= 0 && left <= 0) return false;
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left));
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) throw make_error("poll failed: {}", std::strerror(errno));
    }
}

std::string sockaddr_name(const sockaddr* sa) {
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        return fmt::format("{}:{}", host, port);
    }
    if (sa->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
        ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        return fmt::format("[{}]:{}", host, port);
    }
    return "?";
}

struct AddrInfo {
    addrinfo* list = nullptr;
    ~AddrInfo() {
        if (list != nullptr) ::freeaddrinfo(list);
    }
};

void resolve(const HostPort& address, bool passive, AddrInfo& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    const std::string port = std::to_string(address.port);
    const char* host = address.host.empty() ? nullptr : address.host.c_str();
    const int rc = ::getaddrinfo(host, port.c_str(), &hints, &out.list);
    if (rc != 0) throw make_error("{}: cannot resolve: {}", address.str(), ::gai_strerror(rc));
}

}  // namespace

std::string HostPort::str() const {
    const bool v6 = host.find(':') != std::string::npos;
    return v6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

HostPort parse_host_port(const std::string& text) {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) throw make_error("'{}' is not HOST:PORT", text);
    std::string host = text.substr(0, colon);
    const std::string port_text = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    char* end = nullptr;
    errno = 0;
    const long port = std::strtol(port_text.c_str(), &end, 10);
    if (port_text.empty() || *end != '\0' || errno != 0 || port < 0 || port > 65535) {
        throw make_error("'{}': port '{}' is not a number from 0 to 65535", text, port_text);
    }
    return {host, static_cast<uint16_t>(port)};
}

std::vector<HostPort> parse_host_port_list(const std::string& text) {
    std::vector<HostPort> out;
    size_t at = 0;
    while (at <= text.size()) {
        const size_t comma = std::min(text.find(',', at), text.size());
        if (comma > at) out.push_back(parse_host_port(text.substr(at, comma - at)));
        at = comma + 1;
    }
    return out;
}

std::string format_host_port_list(const std::vector<HostPort>& nodes) {
    std::string out;
    for (const HostPort& n : nodes) {
        if (!out.empty()) out += ',';
        out += n.str();
    }
    return out;
}

TcpStream::TcpStream(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
    set_nonblocking(fd_);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStream::~TcpStream() { close(); }

TcpStream::TcpStream(TcpStream&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), peer_(std::move(other.peer_)) {}

TcpStream& TcpStream::operator=(TcpStream&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        peer_ = std::move(other.peer_);
    }
    return *this;
}

bool TcpStream::peer_is_loopback() const {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (fd_ < 0 || ::getpeername(fd_, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
    if (peer.ss_family == AF_INET) {
        return (ntohl(reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr.s_addr) >> 24) == 127;
    }
    if (peer.ss_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }
    return false;
}

void TcpStream::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

TcpStream TcpStream::connect(const HostPort& address, int timeout_ms) {
    const int64_t deadline = steady_ms() + timeout_ms;
    AddrInfo ai;
    resolve(address, false, ai);
    std::string last_error = "no address";
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last_error = std::strerror(errno);
            continue;
        }
        set_nonblocking(fd);
        int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            if (!poll_until(fd, POLLOUT, deadline)) {
                ::close(fd);
                throw make_error("{}: connection timed out after {} ms", address.str(), timeout_ms);
            }
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            rc = err == 0 ? 0 : -1;
            errno = err;
        }
        if (rc == 0) return TcpStream(fd, address.str());
        last_error = std::strerror(errno);
        ::close(fd);
    }
    throw make_error("{}: cannot connect: {}", address.str(), last_error);
}

void TcpStream::write_all(const void* data, size_t n, int timeout_ms) {
    if (fd_ < 0) throw make_error("{}: write on a closed connection", peer_);
    const auto* p = static_cast<const uint8_t*>(data);
    const int64_t deadline = steady_ms() + timeout_ms;
    while (n > 0) {
        const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!poll_until(fd_, POLLOUT, deadline)) {
                throw make_error("{}: peer stopped reading (write timed out after {} ms)", peer_, timeout_ms);
            }
            continue;
        }
        throw make_error("{}: connection lost while writing: {}", peer_, std::strerror(errno));
    }
}

bool TcpStream::spin_until_readable() {
    if (spin_us_ <= 0) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    char probe;
    do {
        const ssize_t r = ::recv(fd_, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r > 0 || r == 0) return true;  // bytes, or end of stream: no need to sleep
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
        // On a busy machine the peer we wait for may need this core.
        std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < until);
    return false;
}

void TcpStream::read_exact(void* data, size_t n, int timeout_ms) {
    if (fd_ < 0) throw make_error("{}: read on a closed connection", peer_);
    auto* p = static_cast<uint8_t*>(data);
    const int64_t deadline = steady_ms() + timeout_ms;
    while (n > 0) {
        const ssize_t r = ::recv(fd_, p, n, 0);
        if (r > 0) {
            p += r;
            n -= static_cast<size_t>(r);
            continue;
        }
        if (r == 0) throw make_error("{}: connection closed by the peer", peer_);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (spin_until_readable()) continue;
            if (!poll_until(fd_, POLLIN, deadline)) {
                throw make_error("{}: {} bytes missing after {} ms (peer stalled or unreachable)", peer_, n,
                                 timeout_ms);
            }
            continue;
        }
        throw make_error("{}: connection lost while reading: {}", peer_, std::strerror(errno));
    }
}

size_t TcpStream::read_some(void* data, size_t n) {
    if (fd_ < 0) throw make_error("{}: read on a closed connection", peer_);
    for (;;) {
        const ssize_t r = ::recv(fd_, data, n, 0);
        if (r >= 0) return static_cast<size_t>(r);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            poll_until(fd_, POLLIN, -1);
            continue;
        }
        throw make_error("{}: connection lost while reading: {}", peer_, std::strerror(errno));
    }
}

void TcpStream::set_buffer_bytes(int bytes) {
    if (fd_ < 0) return;
    for (int option : {SO_SNDBUF, SO_RCVBUF}) {
        int have = 0;
        socklen_t len = sizeof have;
        // Only ever grows them: a kernel that tuned them larger keeps its size.
        if (::getsockopt(fd_, SOL_SOCKET, option, &have, &len) == 0 && have >= bytes) continue;
        ::setsockopt(fd_, SOL_SOCKET, option, &bytes, sizeof bytes);
    }
}

void TcpStream::shutdown_write() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool TcpStream::wait_readable(int timeout_ms) {
    if (fd_ < 0) return false;
    if (spin_until_readable()) return true;
    return poll_until(fd_, POLLIN, timeout_ms < 0 ? -1 : steady_ms() + timeout_ms);
}

TcpListener::TcpListener(const HostPort& address) : name_(address.str()) {
    AddrInfo ai;
    resolve(address, true, ai);
    std::string last_error = "no address";
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last_error = std::strerror(errno);
            continue;
        }
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
            sockaddr_storage bound{};
            socklen_t len = sizeof bound;
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
            port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
            set_nonblocking(fd);
            fd_ = fd;
            return;
        }
        last_error = std::strerror(errno);
        ::close(fd);
    }
    throw make_error("cannot listen on {}: {}", name_, last_error);
}

TcpListener::~TcpListener() {
    if (fd_ >= 0) ::close(fd_);
}

TcpStream TcpListener::accept(int timeout_ms) {
    const int64_t deadline = timeout_ms < 0 ? -1 : steady_ms() + timeout_ms;
    for (;;) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
        if (fd >= 0) return TcpStream(fd, sockaddr_name(reinterpret_cast<sockaddr*>(&peer)));
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            throw make_error("accept on {} failed: {}", name_, std::strerror(errno));
        }
        if (!poll_until(fd_, POLLIN, deadline)) {
            throw make_error("no connection on {} within {} ms", name_, timeout_ms);
        }
    }
}

}  // namespace tessera
