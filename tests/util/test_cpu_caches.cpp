// Reading the largest cache's size, from sysfs text laid out as Linux lays it.
#include "util/cpu_caches.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace tessera {

TEST(CpuCaches, SizesParseInTheirUnits) {
    EXPECT_EQ(parse_cache_size("48K"), uint64_t{48} << 10);
    EXPECT_EQ(parse_cache_size("266240K\n"), uint64_t{266240} << 10);
    EXPECT_EQ(parse_cache_size("2M"), uint64_t{2} << 20);
    EXPECT_EQ(parse_cache_size("1G"), uint64_t{1} << 30);
    EXPECT_EQ(parse_cache_size("65536"), uint64_t{65536});
    for (const char* bad : {"", "K", "12Q", "-4K", "0x10K", "99999999999999999999K", "18014398509481984K"}) {
        EXPECT_EQ(parse_cache_size(bad), 0u) << bad;
    }
}

TEST(CpuCaches, TheLargestListedCacheIsTheLast) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("tessera_caches_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    const std::pair<const char*, const char*> levels[] = {
        {"index0", "48K"}, {"index1", "32K"}, {"index2", "2048K"}, {"index3", "266240K"}};
    for (const auto& [name, size] : levels) {
        std::filesystem::create_directories(dir / name);
        std::ofstream(dir / name / "size") << size << "\n";
    }
    // Not a cache's directory: never read.
    std::filesystem::create_directories(dir / "power");
    std::ofstream(dir / "power" / "size") << "9G\n";
    EXPECT_EQ(last_level_cache_bytes(dir.string()), uint64_t{266240} << 10);
    // A board whose cores share 2 MiB of L2 and list no L3.
    std::filesystem::remove_all(dir / "index3");
    EXPECT_EQ(last_level_cache_bytes(dir.string()), uint64_t{2} << 20);
    std::filesystem::remove_all(dir);
    // No sysfs at all: sysconf's answer, whatever this machine gives (0 or a size).
    const uint64_t fallback = last_level_cache_bytes(dir.string());
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    EXPECT_EQ(fallback, l3 > 0 ? static_cast<uint64_t>(l3) : l2 > 0 ? static_cast<uint64_t>(l2) : 0u);
}

}  // namespace tessera
