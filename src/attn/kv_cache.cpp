#include "attn/kv_cache.h"

#include "ops/quant_traits.h"
#include "util/checked.h"
#include "util/error.h"

#include <cstring>
#include <vector>

namespace tessera {

bool is_kv_cache_type(QuantType type) {
    return type == QuantType::F32 || type == QuantType::F16 || type == QuantType::Q8_0 || type == QuantType::Q4_0;
}

namespace {
// The bytes of one row, after checking the type can hold it.
uint64_t checked_row_bytes(QuantType type, int head_dim, const char* which) {
    if (!is_kv_cache_type(type)) {
        throw make_error("KV cache type {} for {} is not supported (use f32, f16, q8_0 or q4_0)",
                         quant_type_name(type), which);
    }
    const int64_t block = layout_of(type).block_size;
    if (head_dim % block != 0) {
        throw make_error("a {} cache of {} needs a head width that is a multiple of {} (this model's is {})",
                         quant_type_name(type), which, block, head_dim);
    }
    return quant_row_bytes(type, head_dim);
}
}  // namespace

uint64_t kv_position_bytes(KvCacheTypes types, int64_t n_heads, int64_t head_dim) {
    const int hd = static_cast<int>(head_dim);
    return static_cast<uint64_t>(n_heads) * (checked_row_bytes(types.k, hd, "keys") + checked_row_bytes(types.v, hd, "values"));
}

KvCache::KvCache(int n_layers, int n_kv_heads, int head_dim, int n_ctx, KvCacheTypes types)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), n_ctx_(n_ctx), types_(types) {
    if (n_layers < 0 || n_kv_heads < 0 || head_dim <= 0 || n_ctx <= 0) {
        throw make_error("invalid KV cache shape: {} layers, {} heads, head dim {}, context {}", n_layers, n_kv_heads,
                         head_dim, n_ctx);
    }
    k_row_bytes_ = checked_row_bytes(types.k, head_dim, "keys");
    v_row_bytes_ = checked_row_bytes(types.v, head_dim, "values");
    const char* what = "KV cache size";
    const uint64_t heads = checked_mul(static_cast<uint64_t>(n_layers), static_cast<uint64_t>(n_kv_heads), what);
    const uint64_t rows = checked_mul(heads, static_cast<uint64_t>(n_ctx), what);
    const uint64_t k_bytes = checked_mul(rows, k_row_bytes_, what);
    const uint64_t v_bytes = checked_mul(rows, v_row_bytes_, what);
    bytes_ = checked_add(k_bytes, v_bytes, what);
    // Uninitialized on purpose: untouched pages cost no resident memory, and
    // every position is written before it is read.
    k_.reset(new uint8_t[k_bytes]);
    v_.reset(new uint8_t[v_bytes]);
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
    for (int h = 0; h < n_kv_heads_; ++h) {
        store_head(layer, h, pos, k + static_cast<int64_t>(h) * head_dim_, v + static_cast<int64_t>(h) * head_dim_);
    }
}

namespace {
// One row in `type`: a copy for F32, a conversion (F16) or a quantization
// (Q8_0, Q4_0, as llama.cpp quantizes a cache row) otherwise.
void store_row(const float* src, QuantType type, int n, uint8_t* dst) {
    if (type == QuantType::F32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else {
        require_compute_traits(type, "KV cache").from_float(src, dst, n);
    }
}

void load_rows(const uint8_t* src, QuantType type, int64_t n, float* dst) {
    if (type == QuantType::F32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else {
        require_compute_traits(type, "KV cache").to_float(src, dst, n);
    }
}
}  // namespace

void KvCache::store_head(int layer, int head, int pos, const float* k, const float* v) {
    if (pos < 0 || pos >= n_ctx_) throw make_error("position {} is outside the context of {}", pos, n_ctx_);
    if (layer < 0 || layer >= n_layers_ || head < 0 || head >= n_kv_heads_) {
        throw make_error("internal: KV head {} of layer {} (the cache holds {} heads of {} layers)", head, layer,
                         n_kv_heads_, n_layers_);
    }
    const auto p = static_cast<uint64_t>(pos);
    store_row(k, types_.k, head_dim_, k_.get() + head_index(layer, head) * k_head_bytes() + p * k_row_bytes_);
    store_row(v, types_.v, head_dim_, v_.get() + head_index(layer, head) * v_head_bytes() + p * v_row_bytes_);
    if (landmark_block_ > 0 && (pos + 1) % landmark_block_ == 0) update_landmark(layer, head, pos / landmark_block_);
}

namespace {
void check_rows(const KvCache& c, int layer, int head, int pos0, int n) {
    if (layer < 0 || layer >= c.n_layers() || head < 0 || head >= c.n_kv_heads() || pos0 < 0 || n < 0 ||
        static_cast<int64_t>(pos0) + n > c.n_ctx()) {
        throw make_error("internal: rows {}..{} of KV head {} of layer {} (the cache holds {} heads of {} layers, "
                         "context {})", pos0, static_cast<int64_t>(pos0) + n, head, layer, c.n_kv_heads(), c.n_layers(),
                         c.n_ctx());
    }
}
}  // namespace

void KvCache::read_rows(int layer, int head, int pos0, int n, uint8_t* dst) const {
    check_rows(*this, layer, head, pos0, n);
    const auto p = static_cast<uint64_t>(pos0);
    std::memcpy(dst, k_rows(layer, head) + p * k_row_bytes_, k_row_bytes_ * static_cast<uint64_t>(n));
    std::memcpy(dst + k_row_bytes_ * static_cast<uint64_t>(n), v_rows(layer, head) + p * v_row_bytes_,
                v_row_bytes_ * static_cast<uint64_t>(n));
}

void KvCache::write_rows(int layer, int head, int pos0, int n, const uint8_t* src) {
    check_rows(*this, layer, head, pos0, n);
    const auto p = static_cast<uint64_t>(pos0);
    std::memcpy(k_.get() + head_index(layer, head) * k_head_bytes() + p * k_row_bytes_, src,
                k_row_bytes_ * static_cast<uint64_t>(n));
    std::memcpy(v_.get() + head_index(layer, head) * v_head_bytes() + p * v_row_bytes_,
                src + k_row_bytes_ * static_cast<uint64_t>(n), v_row_bytes_ * static_cast<uint64_t>(n));
    if (landmark_block_ > 0) {
        // The blocks whose last position is among the rows.
        for (int b = pos0 / landmark_block_; (b + 1) * landmark_block_ <= pos0 + n; ++b) update_landmark(layer, head, b);
    }
}

void KvCache::compact_positions(int layer, int head, std::span<const int> kept, FunctionRef<void(float*, int)> rotate) {
    if (layer < 0 || layer >= n_layers_ || head < 0 || head >= n_kv_heads_ || kept.size() > static_cast<size_t>(n_ctx_)) {
        throw make_error("internal: compacting {} positions of KV head {} of layer {}", kept.size(), head, layer);
    }
    thread_local std::vector<float> k;
    k.resize(static_cast<size_t>(head_dim_));
    uint8_t* k_head = k_.get() + head_index(layer, head) * k_head_bytes();
    uint8_t* v_head = v_.get() + head_index(layer, head) * v_head_bytes();
    int first_moved = -1;
    for (size_t j = 0; j < kept.size(); ++j) {
        const int from = kept[j];
        const auto to = static_cast<int>(j);
        if (from < to || from >= n_ctx_ || (j > 0 && from <= kept[j - 1])) {
            throw make_error("internal: kept positions must increase within the context ({} at {})", from, j);
        }
        if (from == to) continue;
        if (first_moved < 0) first_moved = to;
        load_rows(k_head + static_cast<uint64_t>(from) * k_row_bytes_, types_.k, head_dim_, k.data());
        rotate(k.data(), to - from);
        store_row(k.data(), types_.k, head_dim_, k_head + static_cast<uint64_t>(to) * k_row_bytes_);
        std::memmove(v_head + static_cast<uint64_t>(to) * v_row_bytes_, v_head + static_cast<uint64_t>(from) * v_row_bytes_,
                     v_row_bytes_);
    }
    if (landmark_block_ > 0 && first_moved >= 0) {
        const auto n = static_cast<int>(kept.size());
        for (int b = first_moved / landmark_block_; (b + 1) * landmark_block_ <= n; ++b) update_landmark(layer, head, b);
    }
}

void KvCache::enable_landmarks(int block) {
    if (block < 1) throw make_error("internal: landmark blocks of {} positions", block);
    if (block == landmark_block_) return;
    landmark_block_ = block;
    const uint64_t floats = static_cast<uint64_t>(n_layers_) * n_kv_heads_ * lm_head_floats();
    lm_k_.reset(new float[std::max<uint64_t>(floats, 1)]);
    lm_v_.reset(new float[std::max<uint64_t>(floats, 1)]);
}

void KvCache::update_landmark(int layer, int head, int block_index) {
    // Several threads store different heads at once: scratch of their own.
    thread_local std::vector<float> rows;
    const int n = landmark_block_;
    const int hd = head_dim_;
    rows.resize(static_cast<size_t>(n) * hd);
    const auto first = static_cast<uint64_t>(block_index) * static_cast<uint64_t>(n);
    const uint64_t at = head_index(layer, head) * lm_head_floats() + static_cast<uint64_t>(block_index) * hd;
    for (int kv = 0; kv < 2; ++kv) {
        if (kv == 0) {
            load_rows(k_rows(layer, head) + first * k_row_bytes_, types_.k, static_cast<int64_t>(n) * hd, rows.data());
        } else {
            load_rows(v_rows(layer, head) + first * v_row_bytes_, types_.v, static_cast<int64_t>(n) * hd, rows.data());
        }
        landmark_mean(rows.data(), n, hd, (kv == 0 ? lm_k_.get() : lm_v_.get()) + at);
    }
}

void landmark_mean(const float* rows, int n, int hd, float* mean) {
    for (int i = 0; i < hd; ++i) {
        double sum = 0.0;
        for (int r = 0; r < n; ++r) sum += rows[static_cast<size_t>(r) * hd + i];
        mean[i] = static_cast<float>(sum / n);
    }
}

void KvCache::load_k(int layer, int head, int pos, float* dst) const {
    load_rows(k_rows(layer, head) + static_cast<uint64_t>(pos) * k_row_bytes_, types_.k, head_dim_, dst);
}

void KvCache::load_v(int layer, int head, int pos, float* dst) const {
    load_rows(v_rows(layer, head) + static_cast<uint64_t>(pos) * v_row_bytes_, types_.v, head_dim_, dst);
}

void KvCache::load_k_rows(int layer, int head, int n, float* dst) const {
    load_rows(k_rows(layer, head), types_.k, static_cast<int64_t>(n) * head_dim_, dst);
}

void KvCache::load_v_rows(int layer, int head, int n, float* dst) const {
    load_rows(v_rows(layer, head), types_.v, static_cast<int64_t>(n) * head_dim_, dst);
}

}  // namespace tessera
