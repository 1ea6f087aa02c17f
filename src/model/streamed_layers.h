// Layers read from disk as they are used (issue 25's "larger than memory"):
// when a node's share of the weights does not fit the memory it has,
// copy_to_private_memory keeps a prefix of its layers in private memory and
// writes the rest, in the same layout (groups of 16 rows where the CPU has a
// kernel for them: so the bits are those of an all-private run), to a file of
// its own that it maps. Reading the model file's row layout in place would
// save the write but not give the same bits: the grouped kernels add a row's
// blocks in another order than the row kernels.
//
// A token visits the layers in order, cyclically, so an LRU page cache
// smaller than the streamed layers would miss on every page; instead each
// streamed layer is read in just before its turn and dropped right after it,
// and the resident prefix is never touched by reclaim. A background thread
// does both, so neither the disk read nor the page-table work lands on the
// compute threads: when layer L starts, the next streamed layer after L (in
// cyclic order) is populated (MADV_POPULATE_READ, which waits for the pages
// and maps them; MADV_WILLNEED where the kernel is older), and the streamed
// layer used before L is released (MADV_DONTNEED drops the mapping,
// POSIX_FADV_DONTNEED the clean page-cache pages, so a memory cgroup gets
// them back at once instead of by reclaim). At most two streamed layers are
// in memory at a time: the one computing and the next.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {

struct StreamedRange {
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
};

class StreamedLayers {
public:
    // Creates the (unlinked) file of `bytes` in a directory on disk with room
    // for it (TESSERA_OFFLOAD_DIR, TMPDIR, /var/tmp, /tmp: the first one not in
    // memory), mapped writable until finish().
    explicit StreamedLayers(uint64_t bytes);
    uint8_t* data() const { return base_; }
    const std::string& directory() const { return directory_; }
    // After writing [data, data + n): writes it to disk and drops it from memory.
    void flush(const uint8_t* data, uint64_t n);
    // ranges[i]: the bytes of the file layer (layer_begin + i) reads, empty
    // for a resident layer. Makes the mapping read-only and starts streaming.
    void finish(int layer_begin, std::vector<std::vector<StreamedRange>> ranges);
    ~StreamedLayers();
    StreamedLayers(const StreamedLayers&) = delete;
    StreamedLayers& operator=(const StreamedLayers&) = delete;

    // Called before any use of layer `layer`'s weights (cheap when it is the
    // layer already in use): releases the streamed layer used before it and
    // prefetches the next streamed one.
    void use(int layer);

    int streamed_count() const { return streamed_; }
    uint64_t streamed_bytes() const { return streamed_bytes_; }
    // The largest streamed layer: what the window of two adds to memory.
    uint64_t largest_bytes() const { return largest_; }
    bool streamed(int layer) const;

private:
    struct Job {
        int layer;
        bool prefetch;  // else release
    };
    void run();
    void prefetch(int layer);
    void release(int layer);
    int next_streamed_after(int layer) const;

    void drop(const StreamedRange& r);

    int fd_ = -1;
    uint8_t* base_ = nullptr;
    uint64_t bytes_ = 0;
    std::string directory_;
    int layer_begin_ = 0;
    std::vector<std::vector<StreamedRange>> ranges_;
    int streamed_ = 0;
    uint64_t streamed_bytes_ = 0, largest_ = 0;
    int current_ = -1;        // the layer last passed to use()
    int last_streamed_ = -1;  // the streamed layer last in use
    int prefetched_ = -1;     // the streamed layer last asked to be prefetched

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace tessera
