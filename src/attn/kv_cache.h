// The key/value cache of the attention heads one process owns: for each of its
// layers and KV heads, one K row and one V row of head_dim elements per
// position. K and V each have their own type (llama.cpp's -ctk/-ctv): F32,
// F16, or the block types Q8_0 and Q4_0 (a row is head_dim / 32 blocks, so
// head_dim must be a multiple of 32). Laid out [layer][kv_head][position][row]
// so one head's history is contiguous for the attention scan. Memory is
// reserved for the whole context but pages are touched only as positions fill.
#pragma once

#include "ops/quant_type.h"
#include "util/function_ref.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

namespace tessera {

// The types of a cache's K and V rows.
struct KvCacheTypes {
    QuantType k = QuantType::F16;
    QuantType v = QuantType::F16;
    KvCacheTypes() = default;
    KvCacheTypes(QuantType k_type, QuantType v_type) : k(k_type), v(v_type) {}
    // One type for both.
    KvCacheTypes(QuantType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor)
    bool operator==(const KvCacheTypes&) const = default;
};

// A landmark (sparse attention): the mean of n decoded rows of hd elements,
// each element summed in double in row order, divided once and rounded to
// float. The Vulkan backend's landmarks.comp computes the same bits.
void landmark_mean(const float* rows, int n, int hd, float* mean);

// Whether a KV cache can hold rows of `type`.
bool is_kv_cache_type(QuantType type);

// Bytes of one position of `n_heads` heads of head_dim elements, K and V; a
// type the cache cannot hold, or a head width its blocks do not divide, is an
// error saying so.
uint64_t kv_position_bytes(KvCacheTypes types, int64_t n_heads, int64_t head_dim);

class KvCache {
public:
    KvCache(int n_layers, int n_kv_heads, int head_dim, int n_ctx, KvCacheTypes types);

    int n_layers() const { return n_layers_; }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int n_ctx() const { return n_ctx_; }
    KvCacheTypes types() const { return types_; }
    QuantType k_type() const { return types_.k; }
    QuantType v_type() const { return types_.v; }
    uint64_t bytes() const { return bytes_; }

    // Stores the K and V of every owned head for one position of one layer
    // (k and v hold n_kv_heads * head_dim floats).
    void store(int layer, int pos, const float* k, const float* v);
    // The same for one head: k and v hold its head_dim floats.
    void store_head(int layer, int head, int pos, const float* k, const float* v);

    // Rows as the cache holds them, for a peer holding the same cache types
    // (sequence-parallel prefill): positions [pos0, pos0 + n) of one head,
    // n K rows then n V rows. write_rows stores them back, landmarks of the
    // blocks they complete included.
    uint64_t head_rows_bytes(int n) const { return (k_row_bytes_ + v_row_bytes_) * static_cast<uint64_t>(n); }
    void read_rows(int layer, int head, int pos0, int n, uint8_t* dst) const;
    void write_rows(int layer, int head, int pos0, int n, const uint8_t* src);

    // Reads positions [0, n) of one head's K or V rows back as float.
    void load_k(int layer, int head, int pos, float* dst) const;
    void load_v(int layer, int head, int pos, float* dst) const;

    // Reads positions [0, n) of one head's K or V rows as float, n * head_dim
    // values back to back (one conversion for the whole run of rows).
    void load_k_rows(int layer, int head, int n, float* dst) const;
    void load_v_rows(int layer, int head, int n, float* dst) const;

    // One head's K or V rows in place, in their type: position p's row at
    // + p * k_row_bytes() (or v_row_bytes()); kernels read them directly.
    const uint8_t* k_rows(int layer, int head) const { return k_.get() + head_index(layer, head) * k_head_bytes(); }
    const uint8_t* v_rows(int layer, int head) const { return v_.get() + head_index(layer, head) * v_head_bytes(); }
    uint64_t k_row_bytes() const { return k_row_bytes_; }
    uint64_t v_row_bytes() const { return v_row_bytes_; }

    // Compaction (a context shift, an eviction): position kept[j] of one head
    // moves to position j (kept strictly increasing); V rows are copied as
    // they are, K rows read as float, re-rotated by the caller's
    // rotate(k, j - kept[j]) (RoPE to the new position) and stored again;
    // landmarks of the blocks that changed are recomputed.
    void compact_positions(int layer, int head, std::span<const int> kept, FunctionRef<void(float*, int)> rotate);

    // Landmarks for sparse attention (sparse_pattern.h): from now on, as the
    // last position of each block of `block` positions is stored, the block's
    // mean K and V (of the rows as the cache holds them) are kept in F32. A
    // block rewritten (a rolled-back draft, a prompt that reuses a prefix) is
    // recomputed when its last position is stored again.
    void enable_landmarks(int block);
    int landmark_block() const { return landmark_block_; }
    // One head's landmark rows: block b's mean K at landmark_k(...) + b * head_dim.
    const float* landmark_k(int layer, int head) const { return lm_k_.get() + head_index(layer, head) * lm_head_floats(); }
    const float* landmark_v(int layer, int head) const { return lm_v_.get() + head_index(layer, head) * lm_head_floats(); }

private:
    uint64_t head_index(int layer, int head) const { return static_cast<uint64_t>(layer) * n_kv_heads_ + head; }
    uint64_t k_head_bytes() const { return k_row_bytes_ * static_cast<uint64_t>(n_ctx_); }
    uint64_t v_head_bytes() const { return v_row_bytes_ * static_cast<uint64_t>(n_ctx_); }
    uint64_t lm_head_floats() const {
        return static_cast<uint64_t>(n_ctx_ / std::max(landmark_block_, 1)) * static_cast<uint64_t>(head_dim_);
    }
    void update_landmark(int layer, int head, int block_index);

    int n_layers_;
    int n_kv_heads_;
    int head_dim_;
    int n_ctx_;
    KvCacheTypes types_;
    uint64_t k_row_bytes_;
    uint64_t v_row_bytes_;
    uint64_t bytes_;
    std::unique_ptr<uint8_t[]> k_;
    std::unique_ptr<uint8_t[]> v_;
    int landmark_block_ = 0;
    std::unique_ptr<float[]> lm_k_;  // [layer][head][block][head_dim]
    std::unique_ptr<float[]> lm_v_;
};

}  // namespace tessera
