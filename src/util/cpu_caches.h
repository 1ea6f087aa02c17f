// The size of this CPU's largest cache: what a measurement meant to stream
// from memory must exceed, or it reads the cache instead (util/mem_bandwidth.h,
// benchmarks/stream_bench.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// A sysfs cache size ("48K", "266240K", "2M", "1G", plain bytes) in bytes;
// 0 for text that is not one.
uint64_t parse_cache_size(std::string_view text);

// The largest size among the caches listed under `sysfs_dir` (one
// index*/size file each, as Linux gives them for a CPU), or where none can
// be read there, sysconf's level 3, then level 2 size; 0 when nothing tells.
uint64_t last_level_cache_bytes(const std::string& sysfs_dir = "/sys/devices/system/cpu/cpu0/cache");

}  // namespace tessera
