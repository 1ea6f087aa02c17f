// A read-only memory map of a whole file. A process touches only the pages of
// the tensors its slice needs (which is what lets a slice of a model cost only
// its share); those are then copied into private memory, where products run
// faster, and released here (model/llama_model.h, copy_to_private_memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `path`; throws Error naming the file if it cannot be opened or mapped.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    void release();

    std::string path_;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

// Drops this process's mapping of the pages under [data, data + n) (rounded
// out to whole pages) from its resident memory; the bytes stay readable and
// come back from the page cache if touched again. Used after a slice copies
// what it needs out of a tensor it only partly owns.
void release_pages(const void* data, uint64_t n);

// Asks the kernel to start reading the pages under [data, data + n) (whole
// pages) of a mapping now, in the background: rows about to be read from a
// mapped file arrive in parallel rather than one fault at a time.
void advise_will_need(const void* data, uint64_t n);

}  // namespace tessera
