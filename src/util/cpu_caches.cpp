#include "util/cpu_caches.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace tessera {

uint64_t parse_cache_size(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end == text.data()) return 0;
    const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
    int shift = 0;
    if (unit == "K") shift = 10;
    else if (unit == "M") shift = 20;
    else if (unit == "G") shift = 30;
    else if (!unit.empty()) return 0;
    if (value > (UINT64_MAX >> shift)) return 0;
    return value << shift;
}

uint64_t last_level_cache_bytes(const std::string& sysfs_dir) {
    // sysfs lists every level on x86 and ARM alike; glibc's sysconf answers 0
    // for many ARM cores, so it is only the fallback.
    uint64_t largest = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(sysfs_dir, ec)) {
        if (entry.path().filename().string().rfind("index", 0) != 0) continue;
        std::ifstream in(entry.path() / "size");
        std::string text;
        if (in && std::getline(in, text)) largest = std::max(largest, parse_cache_size(text));
    }
    if (largest > 0) return largest;
    for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
        const long bytes = sysconf(name);
        if (bytes > 0) return static_cast<uint64_t>(bytes);
    }
    return 0;
}

}  // namespace tessera
