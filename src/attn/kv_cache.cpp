#include "attn/kv_cache.h"

#include "ops/quant_traits.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fp16.h"

#include <cstring>

namespace tessera {

KvCache::KvCache(int n_layers, int n_kv_heads, int head_dim, int n_ctx, QuantType type)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), n_ctx_(n_ctx), type_(type) {
    if (type != QuantType::F32 && type != QuantType::F16) {
        throw make_error("KV cache type {} is not supported (use f32 or f16)", quant_type_name(type));
    }
    if (n_layers < 0 || n_kv_heads < 0 || head_dim <= 0 || n_ctx <= 0) {
        throw make_error("invalid KV cache shape: {} layers, {} heads, head dim {}, context {}", n_layers, n_kv_heads,
                         head_dim, n_ctx);
    }
    row_bytes_ = static_cast<uint64_t>(head_dim) * (type == QuantType::F32 ? 4 : 2);
    const uint64_t rows = checked_mul(checked_mul(static_cast<uint64_t>(n_layers), static_cast<uint64_t>(n_kv_heads),
                                                  "KV cache size"),
                                      static_cast<uint64_t>(n_ctx), "KV cache size");
    bytes_ = checked_mul(checked_mul(rows, row_bytes_, "KV cache size"), 2, "KV cache size");
    // Uninitialized on purpose: untouched pages cost no resident memory, and
    // every position is written before it is read.
    k_.reset(new uint8_t[bytes_ / 2]);
    v_.reset(new uint8_t[bytes_ / 2]);
}

uint64_t KvCache::row_offset(int layer, int head, int pos) const {
    return ((static_cast<uint64_t>(layer) * n_kv_heads_ + head) * n_ctx_ + pos) * row_bytes_;
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
    for (int h = 0; h < n_kv_heads_; ++h) {
        store_head(layer, h, pos, k + static_cast<int64_t>(h) * head_dim_, v + static_cast<int64_t>(h) * head_dim_);
    }
}

void KvCache::store_head(int layer, int head, int pos, const float* k, const float* v) {
    if (pos < 0 || pos >= n_ctx_) throw make_error("position {} is outside the context of {}", pos, n_ctx_);
    if (layer < 0 || layer >= n_layers_ || head < 0 || head >= n_kv_heads_) {
        throw make_error("internal: KV head {} of layer {} (the cache holds {} heads of {} layers)", head, layer,
                         n_kv_heads_, n_layers_);
    }
    uint8_t* kd = k_.get() + row_offset(layer, head, pos);
    uint8_t* vd = v_.get() + row_offset(layer, head, pos);
    if (type_ == QuantType::F32) {
        std::memcpy(kd, k, row_bytes_);
        std::memcpy(vd, v, row_bytes_);
    } else {
        auto* kh = reinterpret_cast<uint16_t*>(kd);
        auto* vh = reinterpret_cast<uint16_t*>(vd);
        for (int i = 0; i < head_dim_; ++i) {
            kh[i] = fp32_to_fp16(k[i]);
            vh[i] = fp32_to_fp16(v[i]);
        }
    }
}

namespace {
void load_row(const uint8_t* src, QuantType type, int n, float* dst) {
    if (type == QuantType::F32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        for (int i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
    }
}
}  // namespace

void KvCache::load_k(int layer, int head, int pos, float* dst) const {
    load_row(k_.get() + row_offset(layer, head, pos), type_, head_dim_, dst);
}

void KvCache::load_v(int layer, int head, int pos, float* dst) const {
    load_row(v_.get() + row_offset(layer, head, pos), type_, head_dim_, dst);
}

namespace {
void load_rows(const uint8_t* src, QuantType type, int64_t n, float* dst) {
    if (type == QuantType::F32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else {
        require_compute_traits(QuantType::F16, "KV cache").to_float(src, dst, n);
    }
}
}  // namespace

void KvCache::load_k_rows(int layer, int head, int n, float* dst) const {
    load_rows(k_.get() + row_offset(layer, head, 0), type_, static_cast<int64_t>(n) * head_dim_, dst);
}

void KvCache::load_v_rows(int layer, int head, int n, float* dst) const {
    load_rows(v_.get() + row_offset(layer, head, 0), type_, static_cast<int64_t>(n) * head_dim_, dst);
}

}  // namespace tessera
