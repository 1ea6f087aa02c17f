// Shared by the libFuzzer harnesses: bytes as a file the readers can open
// (an in-memory file, no disk), and where test data lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::fuzz {

// A memfd holding `data`, named by its /proc/self/fd path while it lives.
class MemoryFile {
public:
    MemoryFile(const uint8_t* data, size_t size);
    ~MemoryFile();
    MemoryFile(const MemoryFile&) = delete;
    MemoryFile& operator=(const MemoryFile&) = delete;
    const std::string& path() const { return path_; }

private:
    int fd_ = -1;
    std::string path_;
};

// tests/data in the repository (llama.cpp's vocabularies).
std::string test_data();

}  // namespace tessera::fuzz
