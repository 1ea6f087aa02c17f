// How one layer's K/V rows of some positions travel in sequence-parallel
// prefill (kSpRows after its header): exactly, as the cache holds them
// (SliceForward::read_kv_rows), or compressed, as codebook indices of the
// keys before RoPE and of the values (model/kv_codebooks.h). The sender
// encodes from its cache; the receiver checks the size and stores the rows,
// decoded from the codebooks where they are compressed. One codec serves the
// root and the worker nodes.
#pragma once

#include "cluster/session/messages.h"
#include "model/kv_codebooks.h"
#include "model/slice_forward.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

class SpRowCodec {
public:
    // books: null for the exact exchange.
    SpRowCodec(SliceForward& forward, const KvCodebooks* books);

    bool compressed() const { return books_ != nullptr; }
    // Bytes of n positions' rows after the header.
    uint64_t body_bytes(int n) const;
    // A whole kSpRows payload: the header, then the rows of positions
    // [pos0, pos0 + n) of `layer` from the cache.
    void encode(int layer, int pos0, int n, std::vector<uint8_t>& out);
    // Stores a kSpRows payload's rows (header already checked by the caller
    // against what it expects); a body of the wrong size is an Error naming
    // the peer.
    void store(const SpRowsHeader& h, std::span<const uint8_t> payload, const std::string& peer);

private:
    SliceForward& forward_;
    const KvCodebooks* books_;
    std::vector<uint8_t> rows_;
    std::vector<float> k_, v_;
};

}  // namespace tessera
