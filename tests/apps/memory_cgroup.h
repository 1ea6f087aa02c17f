// A memory cgroup (v1, as on these machines: cgroup v2 has no controllers
// here) for tests that run a process under a memory limit.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace tessera::test {

// A cgroup of its own under /sys/fs/cgroup/memory, limited to `limit`
// bytes, removed on destruction (once its processes have ended).
class MemoryCgroup {
public:
    MemoryCgroup(const std::string& name, uint64_t limit) : path_("/sys/fs/cgroup/memory/" + name) {
        ok_ = ::mkdir(path_.c_str(), 0755) == 0;
        if (ok_) std::ofstream(path_ + "/memory.limit_in_bytes") << limit;
    }
    ~MemoryCgroup() {
        if (ok_) ::rmdir(path_.c_str());
    }
    MemoryCgroup(const MemoryCgroup&) = delete;
    MemoryCgroup& operator=(const MemoryCgroup&) = delete;

    // Whether tests may make one: root and the v1 memory controller.
    static bool available() {
        return ::geteuid() == 0 && ::access("/sys/fs/cgroup/memory/cgroup.procs", W_OK) == 0;
    }
    bool ok() const { return ok_; }
    // A shell prefix that moves the command into this cgroup, then execs it.
    std::vector<std::string> wrap(const std::vector<std::string>& argv, const std::string& stderr_file = "") const {
        std::string line = "echo $$ > " + path_ + "/cgroup.procs && exec";
        for (const std::string& a : argv) line += " '" + a + "'";
        if (!stderr_file.empty()) line += " 2> '" + stderr_file + "'";
        return {"/bin/sh", "-c", line};
    }

private:
    std::string path_;
    bool ok_ = false;
};

}  // namespace tessera::test
