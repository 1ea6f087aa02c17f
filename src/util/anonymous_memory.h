// A block of private anonymous memory (mmap), page-aligned, released with its
// owner. Weights are copied here from the mapped model file because matrix
// products stream them at least as fast from it, and much faster when the page
// cache's pages of the file are in a bad state: on this project's development
// VM generation from the mapped file of a freshly generated model ran at ~21
// tok/s on one thread against ~35 from a private copy; later, with the file
// read back, the two were within ~10% (`--mmap` to compare). Transparent huge
// pages are asked for where the kernel grants them.
#pragma once

#include <cstdint>

namespace tessera {

class AnonymousMemory {
public:
    AnonymousMemory() = default;
    // Throws an Error naming the size if the memory cannot be had.
    explicit AnonymousMemory(uint64_t bytes);
    ~AnonymousMemory();
    AnonymousMemory(AnonymousMemory&& other) noexcept;
    AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
    AnonymousMemory(const AnonymousMemory&) = delete;
    AnonymousMemory& operator=(const AnonymousMemory&) = delete;

    uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }

private:
    uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace tessera
