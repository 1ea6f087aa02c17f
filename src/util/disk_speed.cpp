#include "util/disk_speed.h"

#include "util/timer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace tessera {

namespace {

constexpr uint64_t kChunk = 4 << 20;
constexpr uint64_t kMeasure = 32 << 20;
constexpr uint64_t kAlign = 4096;  // O_DIRECT: buffer, offset and length aligned to the block size

double measure(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_size <= 0) return 0.0;
    const auto size = static_cast<uint64_t>(st.st_size);
    const uint64_t length = std::min(kMeasure, size / kAlign * kAlign);
    if (length == 0) return 0.0;
    const uint64_t start = (size - length) / 2 / kAlign * kAlign;
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        // tmpfs and some overlay setups refuse O_DIRECT: read past a dropped cache instead.
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 0.0;
        ::posix_fadvise(fd, static_cast<off_t>(start), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
    }
    void* raw = nullptr;
    if (::posix_memalign(&raw, kAlign, kChunk) != 0) {
        ::close(fd);
        return 0.0;
    }
    std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
    const double t0 = now_seconds();
    uint64_t done = 0;
    while (done < length) {
        const uint64_t want = std::min(kChunk, length - done);
        const ssize_t got = ::pread(fd, buffer.get(), want, static_cast<off_t>(start + done));
        if (got <= 0) break;
        done += static_cast<uint64_t>(got);
    }
    const double seconds = now_seconds() - t0;
    ::close(fd);
    return done > 0 && seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
}

}  // namespace

double disk_read_bytes_per_second(const std::string& path) {
    static std::mutex mutex;
    static std::map<std::string, double> measured;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = measured.find(path);
    if (it == measured.end()) it = measured.emplace(path, measure(path)).first;
    return it->second;
}

}  // namespace tessera
