// `--local N`: N-1 worker processes of this same binary on loopback, started
// and stopped by the root, for a one-command tensor-parallel run. Each worker
// is a real process on a real TCP port; it dies with its parent
// (PR_SET_PDEATHSIG) and serves one session only.
#pragma once

#include "net/tcp.h"
#include "net/wire_key.h"

#include <string>
#include <sys/types.h>
#include <vector>

namespace tessera {

class LocalWorkers {
public:
    // Starts n workers of `binary` serving model_path with n_threads each and
    // waits (up to timeout_ms) until each has announced its port. `mmap`:
    // they compute from the mapped file (worker --mmap), as the root does.
    // `key`: the session key the workers are given through a pipe (--key-fd).
    // `extra`: more worker flags (--codebooks FILE).
    LocalWorkers(const std::string& binary, const std::string& model_path, int n, int n_threads, int timeout_ms,
                 bool mmap = false, const WireKey* key = nullptr, const std::vector<std::string>& extra = {});
    // Stops the workers that are still running and reaps them.
    ~LocalWorkers();
    LocalWorkers(const LocalWorkers&) = delete;
    LocalWorkers& operator=(const LocalWorkers&) = delete;

    const std::vector<HostPort>& addresses() const { return addresses_; }
    const std::vector<pid_t>& pids() const { return pids_; }

private:
    void stop();

    std::vector<pid_t> pids_;
    std::vector<HostPort> addresses_;
};

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace tessera
