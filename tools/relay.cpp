// tessera-relay: a TCP relay that delays every byte by a fixed time in each
// direction, a test tool for networks this kernel cannot emulate (it has no
// netem qdisc; bandwidth is limited with tc tbf instead). Bytes keep their
// order; each chunk read is forwarded `delay` after it arrived.
//
//   tessera-relay --listen 127.0.0.1:0 --target 10.0.0.2:7000 --delay-ms 5
//
// --record DIR writes every byte each connection carries to DIR/N.up
// (client to target) and DIR/N.down, as an eavesdropper on the link sees it.
// --reset-first-after-bytes N resets the first connection (RST to both ends)
// once N bytes have gone through it: a dropped link, mid-session.
//
// The first line on stdout is "listening on port N".
#include "net/tcp.h"
#include "util/error.h"

#include <CLI/CLI.hpp>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using tessera::TcpStream;

struct Chunk {
    Clock::time_point due;
    std::vector<uint8_t> bytes;
};

// One direction: a reader queues chunks with their due time, a writer sends
// them when due. Either side ending closes both streams.
class Pipe {
public:
    // `carried` counts the bytes of both directions; past reset_after (0:
    // never) the connection is reset.
    Pipe(TcpStream& from, TcpStream& to, std::chrono::microseconds delay, std::FILE* record,
         std::atomic<uint64_t>& carried, uint64_t reset_after)
        : from_(from), to_(to), delay_(delay), record_(record), carried_(carried), reset_after_(reset_after) {}

    void run() {
        std::thread writer([this] { write_loop(); });
        read_loop();
        writer.join();
    }

private:
    void read_loop() {
        std::vector<uint8_t> buffer(64 * 1024);
        try {
            for (;;) {
                if (!from_.wait_readable(1000)) {
                    if (done()) break;
                    continue;
                }
                const size_t n = from_.read_some(buffer.data(), buffer.size());
                if (n == 0) break;
                if (record_ != nullptr) {
                    std::fwrite(buffer.data(), 1, n, record_);
                    std::fflush(record_);
                }
                if (reset_after_ > 0 && carried_.fetch_add(n) + n >= reset_after_) {
                    // Linger 0: closing the sockets sends RST to both ends;
                    // shutting down our reads ends both directions' loops.
                    const linger abort_on_close{1, 0};
                    for (int fd : {from_.fd(), to_.fd()}) {
                        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
                        ::shutdown(fd, SHUT_RD);
                    }
                    std::fprintf(stderr, "relay: reset the connection after %llu bytes\n",
                                 static_cast<unsigned long long>(carried_.load()));
                    break;
                }
                std::lock_guard<std::mutex> lock(mutex_);
                queue_.push_back({Clock::now() + delay_, std::vector<uint8_t>(buffer.begin(), buffer.begin() + n)});
                wake_.notify_one();
            }
        } catch (const tessera::Error&) {
        }
        finish();
    }

    void write_loop() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            if (queue_.empty()) {
                if (finished_) break;
                wake_.wait(lock);
                continue;
            }
            const auto due = queue_.front().due;
            if (Clock::now() < due) {
                wake_.wait_until(lock, due);
                continue;
            }
            Chunk chunk = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            try {
                to_.write_all(chunk.bytes.data(), chunk.bytes.size(), 30000);
            } catch (const tessera::Error&) {
                lock.lock();
                finished_ = true;
                break;
            }
            lock.lock();
        }
        to_.shutdown_write();
    }

    bool done() {
        std::lock_guard<std::mutex> lock(mutex_);
        return finished_;
    }
    void finish() {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_ = true;
        wake_.notify_one();
    }

    TcpStream& from_;
    TcpStream& to_;
    std::chrono::microseconds delay_;
    std::FILE* record_;
    std::atomic<uint64_t>& carried_;
    uint64_t reset_after_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Chunk> queue_;
    bool finished_ = false;
};

std::FILE* open_record(const std::string& dir, int connection, const char* direction) {
    if (dir.empty()) return nullptr;
    return std::fopen((dir + "/" + std::to_string(connection) + "." + direction).c_str(), "wb");
}

void serve(TcpStream client, tessera::HostPort target, std::chrono::microseconds delay, std::string record_dir,
           int connection, uint64_t reset_after) {
    std::FILE* up_record = open_record(record_dir, connection, "up");
    std::FILE* down_record = open_record(record_dir, connection, "down");
    std::atomic<uint64_t> carried{0};
    try {
        TcpStream server = TcpStream::connect(target, 10000);
        Pipe up(client, server, delay, up_record, carried, reset_after);
        Pipe down(server, client, delay, down_record, carried, reset_after);
        std::thread t([&] { down.run(); });
        up.run();
        t.join();
    } catch (const tessera::Error& e) {
        std::fprintf(stderr, "relay: %s\n", e.what());
    }
    if (up_record != nullptr) std::fclose(up_record);
    if (down_record != nullptr) std::fclose(down_record);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"tessera-relay: a TCP relay that adds a fixed delay in each direction (test tool)"};
    std::string listen = "127.0.0.1:0", target;
    double delay_ms = 0.0;
    app.add_option("--listen", listen, "HOST:PORT to listen on")->capture_default_str();
    app.add_option("--target", target, "HOST:PORT to forward to")->required();
    app.add_option("--delay-ms", delay_ms, "One-way delay added in each direction, ms")->capture_default_str();
    std::string record_dir;
    app.add_option("--record", record_dir, "Write each connection's bytes to DIR/N.up and DIR/N.down");
    uint64_t reset_after = 0;
    app.add_option("--reset-first-after-bytes", reset_after,
                   "Reset the first connection (RST both ways) after this many bytes in both directions");
    CLI11_PARSE(app, argc, argv);
    try {
        if (!record_dir.empty() && !std::filesystem::is_directory(record_dir)) {
            throw tessera::make_error("--record {}: not a directory", record_dir);
        }
        tessera::TcpListener listener(tessera::parse_host_port(listen));
        const tessera::HostPort to = tessera::parse_host_port(target);
        std::printf("listening on port %u\n", static_cast<unsigned>(listener.port()));
        std::fflush(stdout);
        const auto delay = std::chrono::microseconds(static_cast<int64_t>(delay_ms * 1000));
        for (int connection = 0;; ++connection) {
            std::thread(serve, listener.accept(-1), to, delay, record_dir, connection, connection == 0 ? reset_after : 0)
                .detach();
        }
    } catch (const tessera::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
