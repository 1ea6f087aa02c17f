#include "model/streamed_layers.h"

#include "util/error.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL and get MADV_WILLNEED
#endif

namespace tessera {

namespace {

// A range rounded out to whole pages (madvise takes page-aligned starts).
std::pair<uintptr_t, uintptr_t> page_span(const StreamedRange& r) {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<uintptr_t>(r.data) & ~(page - 1);
    const auto end = (reinterpret_cast<uintptr_t>(r.data) + r.bytes + page - 1) & ~(page - 1);
    return {begin, end};
}

}  // namespace

StreamedLayers::StreamedLayers(uint64_t bytes) : bytes_(bytes) {
    std::vector<std::string> candidates;
    for (const char* env : {"TESSERA_OFFLOAD_DIR", "TMPDIR"}) {
        if (const char* v = std::getenv(env); v != nullptr && *v != '\0') candidates.emplace_back(v);
    }
    candidates.emplace_back("/var/tmp");
    candidates.emplace_back("/tmp");
    std::string tried;
    for (const std::string& dir : candidates) {
        struct statfs fs {};
        struct statvfs vfs {};
        if (::statfs(dir.c_str(), &fs) != 0 || ::statvfs(dir.c_str(), &vfs) != 0) continue;
        // A file in memory (tmpfs, ramfs) would only move the weights, not free them.
        if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
            tried += fmt::format("{}{} (in memory)", tried.empty() ? "" : ", ", dir);
            continue;
        }
        const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
        if (free_bytes < bytes) {
            tried += fmt::format("{}{} ({} bytes free)", tried.empty() ? "" : ", ", dir, free_bytes);
            continue;
        }
        fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
            // A file system without O_TMPFILE (overlayfs before Linux 6.6):
            // a named file, unlinked at once, is as private.
            std::string name = dir + "/tessera-streamed-XXXXXX";
            fd_ = ::mkostemp(name.data(), O_CLOEXEC);
            if (fd_ >= 0) ::unlink(name.c_str());
        }
        if (fd_ < 0) {
            tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", dir, std::strerror(errno));
            continue;
        }
        directory_ = dir;
        break;
    }
    if (fd_ < 0) {
        throw make_error("no directory on disk with room for {} bytes of streamed layers (tried {}; set "
                         "TESSERA_OFFLOAD_DIR, or --no-offload)", bytes, tried);
    }
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
        const int e = errno;
        ::close(fd_);
        throw make_error("cannot size a file of {} bytes for streamed layers in {}: {}", bytes, directory_, std::strerror(e));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd_);
        throw make_error("cannot map {} bytes of streamed layers in {}: {}", bytes, directory_, std::strerror(e));
    }
    base_ = static_cast<uint8_t*>(p);
}

StreamedLayers::~StreamedLayers() {
    if (thread_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    if (base_ != nullptr) ::munmap(base_, bytes_);
    if (fd_ >= 0) ::close(fd_);  // unlinked: the file goes with it
}

void StreamedLayers::flush(const uint8_t* data, uint64_t n) {
    const auto [begin, end] = page_span({data, n});
    // Written back before it is dropped: dirty pages cannot be reclaimed at
    // once, and a memory cgroup would count every layer written so far.
    if (::msync(reinterpret_cast<void*>(begin), end - begin, MS_SYNC) != 0) {
        throw make_error("cannot write streamed layers to {}: {}", directory_, std::strerror(errno));
    }
    drop({data, n});
}

void StreamedLayers::finish(int layer_begin, std::vector<std::vector<StreamedRange>> ranges) {
    layer_begin_ = layer_begin;
    ranges_ = std::move(ranges);
    for (const auto& layer : ranges_) {
        uint64_t bytes = 0;
        for (const StreamedRange& r : layer) bytes += r.bytes;
        if (!layer.empty()) ++streamed_;
        streamed_bytes_ += bytes;
        largest_ = std::max(largest_, bytes);
    }
    ::mprotect(base_, bytes_, PROT_READ);  // nothing writes weights from here on
    thread_ = std::thread([this] { run(); });
}

bool StreamedLayers::streamed(int layer) const {
    const int i = layer - layer_begin_;
    return i >= 0 && i < static_cast<int>(ranges_.size()) && !ranges_[static_cast<size_t>(i)].empty();
}

int StreamedLayers::next_streamed_after(int layer) const {
    const int n = static_cast<int>(ranges_.size());
    for (int k = 1; k <= n; ++k) {
        const int candidate = layer_begin_ + (layer - layer_begin_ + k) % n;
        if (streamed(candidate)) return candidate;
    }
    return -1;
}

void StreamedLayers::use(int layer) {
    if (layer == current_) return;
    current_ = layer;
    // At most a release and a prefetch; no allocation on the token's path.
    Job jobs[2];
    int n_jobs = 0;
    if (streamed(layer)) {
        if (last_streamed_ >= 0 && last_streamed_ != layer) jobs[n_jobs++] = {last_streamed_, false};
        last_streamed_ = layer;
    }
    const int next = next_streamed_after(layer);
    if (next >= 0 && next != layer && next != prefetched_) {
        jobs[n_jobs++] = {next, true};
        prefetched_ = next;
    }
    if (n_jobs == 0) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        jobs_.insert(jobs_.end(), jobs, jobs + n_jobs);
    }
    wake_.notify_one();
}

void StreamedLayers::run() {
    for (;;) {
        Job job{};
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (stop_) return;
            job = jobs_.front();
            jobs_.pop_front();
        }
        if (job.prefetch) prefetch(job.layer);
        else release(job.layer);
    }
}

void StreamedLayers::prefetch(int layer) {
    for (const StreamedRange& r : ranges_[static_cast<size_t>(layer - layer_begin_)]) {
        const auto [begin, end] = page_span(r);
        void* p = reinterpret_cast<void*>(begin);
        // Errors are not fatal here: a page not read ahead is read when the
        // product touches it.
        if (::madvise(p, end - begin, MADV_POPULATE_READ) != 0) ::madvise(p, end - begin, MADV_WILLNEED);
    }
}

void StreamedLayers::release(int layer) {
    for (const StreamedRange& r : ranges_[static_cast<size_t>(layer - layer_begin_)]) drop(r);
}

void StreamedLayers::drop(const StreamedRange& r) {
    const auto [begin, end] = page_span(r);
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    ::posix_fadvise(fd_, static_cast<off_t>(begin - reinterpret_cast<uintptr_t>(base_)), static_cast<off_t>(end - begin),
                    POSIX_FADV_DONTNEED);
}

}  // namespace tessera
