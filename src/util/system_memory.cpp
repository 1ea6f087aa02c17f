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

// The limit left in this process's cgroup, from /proc/self/cgroup.
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
        if (controllers.find("memory") != std::string::npos) {
            limit = read_number("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
            usage = read_number("/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes");
        } else if (controllers.empty()) {
            limit = read_number("/sys/fs/cgroup" + path + "/memory.max");
            usage = read_number("/sys/fs/cgroup" + path + "/memory.current");
        }
        if (limit != std::numeric_limits<uint64_t>::max()) {
            if (usage == std::numeric_limits<uint64_t>::max()) usage = 0;
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
