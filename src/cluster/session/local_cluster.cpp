#include "cluster/session/local_cluster.h"

#include "util/error.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <vector>

namespace tessera {

namespace {

// Reads the worker's first line ("listening on PORT") within the deadline.
uint16_t read_announced_port(int fd, pid_t pid, int timeout_ms) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) throw make_error("local worker (pid {}) did not start within {} ms", pid, timeout_ms);
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char c;
        const ssize_t r = ::read(fd, &c, 1);
        if (r <= 0) throw make_error("local worker (pid {}) exited before listening (see its error above)", pid);
        if (c == '\n') break;
        line += c;
    }
    const std::string prefix = "listening on port ";
    if (line.rfind(prefix, 0) != 0) throw make_error("local worker (pid {}) said '{}'", pid, line);
    return static_cast<uint16_t>(std::stoi(line.substr(prefix.size())));
}

}  // namespace

std::string self_executable() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw make_error("cannot find this executable: {}", std::strerror(errno));
    return std::string(buf, static_cast<size_t>(n));
}

LocalWorkers::LocalWorkers(const std::string& binary, const std::string& model_path, int n, int n_threads,
                           int timeout_ms, bool mmap, const WireKey* key, const std::vector<std::string>& extra) {
    try {
        for (int i = 0; i < n; ++i) {
            int pipe_fds[2];
            if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw make_error("pipe: {}", std::strerror(errno));
            // The key travels through a second pipe the child reads as fd 3:
            // never on a command line, in the environment or on disk.
            int key_fds[2] = {-1, -1};
            if (key != nullptr) {
                if (::pipe2(key_fds, O_CLOEXEC) != 0) throw make_error("pipe: {}", std::strerror(errno));
                const std::string hex = key_to_hex(*key) + "\n";
                const bool written = ::write(key_fds[1], hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
                ::close(key_fds[1]);
                if (!written) {
                    ::close(key_fds[0]);
                    throw make_error("cannot pass the key to a local worker");
                }
            }
            const std::string threads = std::to_string(n_threads);
            const pid_t parent = ::getpid();
            const pid_t pid = ::fork();
            if (pid < 0) throw make_error("fork: {}", std::strerror(errno));
            if (pid == 0) {
                // The worker must not outlive the root that started it.
                ::prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (::getppid() != parent) ::_exit(1);
                ::dup2(pipe_fds[1], STDOUT_FILENO);
                std::vector<const char*> argv = {binary.c_str(), "worker", "--listen", "127.0.0.1:0", "-m",
                                                 model_path.c_str(), "-t", threads.c_str(), "--once"};
                if (mmap) argv.push_back("--mmap");
                for (const std::string& arg : extra) argv.push_back(arg.c_str());
                if (key_fds[0] >= 0) {
                    // dup2 clears close-on-exec on the copy (and does nothing if it is fd 3 already).
                    if (key_fds[0] == 3) ::fcntl(3, F_SETFD, 0);
                    else ::dup2(key_fds[0], 3);
                    argv.push_back("--key-fd");
                    argv.push_back("3");
                }
                argv.push_back(nullptr);
                ::execv(binary.c_str(), const_cast<char* const*>(argv.data()));
                ::_exit(127);
            }
            ::close(pipe_fds[1]);
            if (key_fds[0] >= 0) ::close(key_fds[0]);
            pids_.push_back(pid);
            const uint16_t port = [&] {
                try {
                    return read_announced_port(pipe_fds[0], pid, timeout_ms);
                } catch (...) {
                    ::close(pipe_fds[0]);
                    throw;
                }
            }();
            ::close(pipe_fds[0]);
            addresses_.push_back({"127.0.0.1", port});
        }
    } catch (...) {
        stop();
        throw;
    }
}

LocalWorkers::~LocalWorkers() { stop(); }

void LocalWorkers::stop() {
    // Workers leave by themselves after the root's shutdown message; give
    // them a moment, then make sure.
    for (pid_t pid : pids_) {
        int status = 0;
        bool exited = false;
        for (int i = 0; i < 50 && !exited; ++i) {
            exited = ::waitpid(pid, &status, WNOHANG) == pid;
            if (!exited) ::usleep(10000);
        }
        if (!exited) {
            ::kill(pid, SIGTERM);
            ::waitpid(pid, &status, 0);
        }
    }
    pids_.clear();
}

}  // namespace tessera
