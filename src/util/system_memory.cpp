#include "util/system_memory.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace tessera {

namespace {

uint64_t read_number(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return std::numeric_limits<uint64_t>::max();
    try {
        return std::stoull(text);
    } catch (...) {
        return std::numeric_limits<uint64_t>::max();
    }
}

uint64_t mem_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
        if (key == "MemAvailable:") return kib * 1024;
    }
    return std::numeric_limits<uint64_t>::max();
}

// The page cache a cgroup's usage counts that the kernel reclaims when the
// limit is reached (clean file pages: a model file read earlier, streamed
// layers): memory.stat's file LRU lists (v1: total_*_file, v2: *_file).
uint64_t reclaimable_file_bytes(const std::string& stat_path, bool v1) {
    std::ifstream in(stat_path);
    std::string key;
    uint64_t value = 0, total = 0;
    while (in >> key >> value) {
        if (v1 ? (key == "total_inactive_file" || key == "total_active_file")
               : (key == "inactive_file" || key == "active_file")) {
            total += value;
        }
    }
    return total;
}

// The limit left in this process's cgroup, from /proc/self/cgroup: the limit
// less what the cgroup uses, not counting page cache the kernel would
// reclaim (else a node that has just read its model file, or ran before in
// the same cgroup, would look out of memory).
uint64_t cgroup_headroom() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    uint64_t headroom = std::numeric_limits<uint64_t>::max();
    while (std::getline(in, line)) {
        // v1: "N:memory:/path"; v2: "0::/path".
        const size_t a = line.find(':');
        const size_t b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        const std::string path = line.substr(b + 1);
        uint64_t limit = std::numeric_limits<uint64_t>::max(), usage = 0;
        uint64_t cache = 0;
        if (controllers.find("memory") != std::string::npos) {
            const std::string dir = "/sys/fs/cgroup/memory" + path;
            limit = read_number(dir + "/memory.limit_in_bytes");
            usage = read_number(dir + "/memory.usage_in_bytes");
            cache = reclaimable_file_bytes(dir + "/memory.stat", true);
        } else if (controllers.empty()) {
            const std::string dir = "/sys/fs/cgroup" + path;
            limit = read_number(dir + "/memory.max");
            usage = read_number(dir + "/memory.current");
            cache = reclaimable_file_bytes(dir + "/memory.stat", false);
        }
        if (limit != std::numeric_limits<uint64_t>::max()) {
            if (usage == std::numeric_limits<uint64_t>::max()) usage = 0;
            usage -= std::min(usage, cache);
            headroom = std::min(headroom, limit > usage ? limit - usage : 0);
        }
    }
    return headroom;
}

}  // namespace

namespace {
uint64_t status_kib(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(field + ":", 0) == 0) {
            std::istringstream values(line.substr(field.size() + 1));
            uint64_t kib = 0;
            values >> kib;
            return kib * 1024;
        }
    }
    return 0;
}
}  // namespace

uint64_t resident_memory_bytes() { return status_kib("VmRSS"); }
uint64_t peak_resident_memory_bytes() { return status_kib("VmHWM"); }

uint64_t available_memory_bytes() { return std::min(mem_available(), cgroup_headroom()); }

}  // namespace tessera
