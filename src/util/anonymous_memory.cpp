#include "util/anonymous_memory.h"

#include "util/error.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tessera {

AnonymousMemory::AnonymousMemory(uint64_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw make_error("cannot allocate {} bytes of memory: {}", bytes, std::strerror(errno));
    // Fewer TLB misses while streaming weights; refused silently where THP is off.
    ::madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
}

AnonymousMemory::~AnonymousMemory() {
    if (data_ != nullptr) ::munmap(data_, size_);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) ::munmap(data_, size_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

}  // namespace tessera
