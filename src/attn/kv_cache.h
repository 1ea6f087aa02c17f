// The key/value cache of the attention heads one process owns: for each of its
// layers and KV heads, one K row and one V row of head_dim elements per
// position, in F32 or F16. Laid out [layer][kv_head][position][head_dim] so
// one head's history is contiguous for the attention scan. Memory is reserved
// for the whole context but pages are touched only as positions fill.
#pragma once

#include "ops/quant_type.h"

#include <cstdint>
#include <memory>

namespace tessera {

class KvCache {
public:
    KvCache(int n_layers, int n_kv_heads, int head_dim, int n_ctx, QuantType type);

    int n_layers() const { return n_layers_; }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int n_ctx() const { return n_ctx_; }
    QuantType type() const { return type_; }
    uint64_t bytes() const { return bytes_; }

    // Stores the K and V of every owned head for one position of one layer
    // (k and v hold n_kv_heads * head_dim floats).
    void store(int layer, int pos, const float* k, const float* v);
    // The same for one head: k and v hold its head_dim floats.
    void store_head(int layer, int head, int pos, const float* k, const float* v);

    // Reads positions [0, n) of one head's K or V rows back as float.
    void load_k(int layer, int head, int pos, float* dst) const;
    void load_v(int layer, int head, int pos, float* dst) const;

    // Reads positions [0, n) of one head's K or V rows as float, n * head_dim
    // values back to back (one conversion for the whole run of rows).
    void load_k_rows(int layer, int head, int n, float* dst) const;
    void load_v_rows(int layer, int head, int n, float* dst) const;

    // One head's K or V rows in place, in the cache's type: position p's row
    // at + p * row_bytes() (kernels that read F16 directly need no copy).
    const uint8_t* k_rows(int layer, int head) const { return k_.get() + row_offset(layer, head, 0); }
    const uint8_t* v_rows(int layer, int head) const { return v_.get() + row_offset(layer, head, 0); }
    uint64_t row_bytes() const { return row_bytes_; }

private:
    uint64_t row_offset(int layer, int head, int pos) const;

    int n_layers_;
    int n_kv_heads_;
    int head_dim_;
    int n_ctx_;
    QuantType type_;
    uint64_t row_bytes_;
    uint64_t bytes_;
    std::unique_ptr<uint8_t[]> k_;
    std::unique_ptr<uint8_t[]> v_;
};

}  // namespace tessera
