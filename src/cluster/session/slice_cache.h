// A worker without the model file keeps the slices roots send it in a cache
// directory. Everything about a cache entry that comes from a peer is
// checked: its name is built only from a validated hex fingerprint and the
// slice's integers, it is written under the cache directory only, its size
// is announced and checked against the cache's cap (--cache-max, older
// entries evicted first) and the free disk before a byte is written, an
// incomplete transfer leaves nothing behind, and an entry is verified by
// its hash whenever it is loaded.
#pragma once

#include "model/llama_model.h"
#include "model/slice.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

class FrameChannel;

// Whether `text` is a model fingerprint as this build writes them (hex digits only).
bool is_fingerprint(const std::string& text);

// A slice file in the cache, for the status view.
struct CachedSlice {
    std::string name;         // its file name
    std::string fingerprint;  // of the model it was cut from
    uint64_t bytes = 0;
};

class SliceCache {
public:
    SliceCache(std::string dir, uint64_t max_bytes);

    // The cached slice, verified against its stored hash and the request;
    // nullptr if absent or damaged (a damaged entry is removed).
    std::unique_ptr<LlamaModel> open(const std::string& fingerprint, const Slice& slice) const;

    // Receives a slice file from the root (kSliceBegin {bytes}, kSliceData*,
    // kSliceEnd {bytes, checksum}), checks it and stores it; then open()s it.
    std::unique_ptr<LlamaModel> receive(FrameChannel& channel, const std::string& fingerprint, const Slice& slice,
                                        int timeout_ms);

    std::string path_of(const std::string& fingerprint, const Slice& slice) const;
    // The slices the cache holds (none when its folder does not exist).
    std::vector<CachedSlice> entries() const;

private:
    // Removes the oldest entries until `bytes` more fit under the cap.
    void make_room(uint64_t bytes, const std::string& peer) const;

    std::string dir_;
    uint64_t max_bytes_;
};

}  // namespace tessera
