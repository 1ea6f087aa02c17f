#include "model/kv_codebooks.h"

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "ops/quant_traits.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

namespace {

constexpr const char* kArch = "tessera-kv-codebooks";
constexpr int kMaxCodes = 1 << 16;

// Most values one file may hold (layers x kinds x codes x kv_dim), so a
// malformed header cannot ask for gigabytes.
constexpr int64_t kMaxValues = int64_t{1} << 30;

}  // namespace

KvCodebooks::KvCodebooks(int n_layer, int kv_dim, int groups, int codes, std::string fingerprint)
    : n_layer_(n_layer), kv_dim_(kv_dim), groups_(groups), codes_(codes), fingerprint_(std::move(fingerprint)) {
    if (n_layer < 1 || kv_dim < 1 || groups < 1 || groups > kv_dim || kv_dim % groups != 0 || codes < 2 ||
        codes > kMaxCodes) {
        throw make_error("codebooks of {} codes in {} groups do not fit {} layers of K/V rows of {} values (groups must "
                         "divide the row; 2 to {} codes)", codes, groups, n_layer, kv_dim, kMaxCodes);
    }
    const int64_t values = int64_t{2} * n_layer * codes * kv_dim;
    if (values > kMaxValues) throw make_error("codebooks of {} values are too large", values);
    words_.assign(static_cast<size_t>(values), 0.0f);
    norms_.assign(static_cast<size_t>(2) * n_layer * groups * codes, 0.0f);
}

void KvCodebooks::refresh_norms() {
    const int d = group_dim();
    for (size_t c = 0; c < norms_.size(); ++c) {
        const float* w = words_.data() + c * static_cast<size_t>(d);
        float sum = 0.0f;
        for (int i = 0; i < d; ++i) sum += w[i] * w[i];
        norms_[c] = sum;
    }
}

void KvCodebooks::nearest_rows(int layer, Kind kind, int group, const float* rows, int64_t row_stride, int n,
                               int* out) const {
    constexpr int kRows = 32;
    const int d = group_dim();
    const QuantTraits& f32 = require_compute_traits(QuantType::F32, "codebook search");
    const float* w = codewords(layer, kind, group);
    const float* norms = norms_.data() + ((static_cast<size_t>(layer) * 2 + kind) * groups_ + static_cast<size_t>(group)) * codes_;
    thread_local std::vector<float> dots;
    dots.resize(static_cast<size_t>(kRows) * codes_);
    for (int t0 = 0; t0 < n; t0 += kRows) {
        const int m = std::min(kRows, n - t0);
        f32.vec_dot_tile(d, w, sizeof(float) * d, codes_, rows + t0 * row_stride, sizeof(float) * row_stride, m,
                         dots.data(), codes_);
        for (int t = 0; t < m; ++t) {
            const float* dt = dots.data() + static_cast<size_t>(t) * codes_;
            int best = 0;
            float best_score = std::numeric_limits<float>::infinity();
            for (int c = 0; c < codes_; ++c) {
                const float score = norms[c] - 2.0f * dt[c];
                if (score < best_score) {
                    best_score = score;
                    best = c;
                }
            }
            out[t0 + t] = best;
        }
    }
}

std::string KvCodebooks::digest() const {
    // FNV-1a over the shape and the codewords' bytes.
    uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&h](const void* data, size_t n) {
        const auto* p = static_cast<const uint8_t*>(data);
        for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    };
    const int shape[] = {n_layer_, kv_dim_, groups_, codes_};
    mix(shape, sizeof shape);
    mix(fingerprint_.data(), fingerprint_.size());
    mix(words_.data(), words_.size() * sizeof(float));
    return fmt::format("{:016x}", h);
}

int KvCodebooks::index_bits() const {
    int bits = 1;
    while ((1 << bits) < codes_) ++bits;
    return bits;
}

uint64_t KvCodebooks::packed_bytes(int n) const {
    return (static_cast<uint64_t>(n) * static_cast<uint64_t>(bits_per_position()) + 7) / 8;
}

void KvCodebooks::require_model(const std::string& fingerprint, int n_layer, int kv_dim) const {
    if (fingerprint != fingerprint_) {
        throw make_error("these codebooks were fitted on another model (fingerprint {} != {}): fit them on this one "
                         "with tessera vq-fit", fingerprint_, fingerprint);
    }
    if (n_layer != n_layer_ || kv_dim != kv_dim_) {
        throw make_error("codebooks of {} layers x {} values do not fit a model of {} layers x {}", n_layer_, kv_dim_,
                         n_layer, kv_dim);
    }
}

float* KvCodebooks::codewords(int layer, Kind kind, int group) {
    return const_cast<float*>(static_cast<const KvCodebooks*>(this)->codewords(layer, kind, group));
}

const float* KvCodebooks::codewords(int layer, Kind kind, int group) const {
    const size_t block = static_cast<size_t>(codes_) * static_cast<size_t>(group_dim());
    return words_.data() + ((static_cast<size_t>(layer) * 2 + kind) * groups_ + static_cast<size_t>(group)) * block;
}

int KvCodebooks::nearest(int layer, Kind kind, int group, const float* x) const {
    const int d = group_dim();
    const float* w = codewords(layer, kind, group);
    int best = 0;
    float best_distance = std::numeric_limits<float>::infinity();
    for (int c = 0; c < codes_; ++c) {
        const float* wc = w + static_cast<size_t>(c) * d;
        float distance = 0.0f;
        for (int i = 0; i < d; ++i) {
            const float e = x[i] - wc[i];
            distance += e * e;
        }
        if (distance < best_distance) {
            best_distance = distance;
            best = c;
        }
    }
    return best;
}

void KvCodebooks::encode(int layer, int n, const float* k, const float* v, std::vector<uint8_t>& packed) const {
    packed.assign(packed_bytes(n), 0);
    const int bits = index_bits();
    thread_local std::vector<int> index;
    index.resize(static_cast<size_t>(n) * groups_);
    uint64_t at = 0;
    for (int kind = 0; kind < 2; ++kind) {
        const float* rows = kind == kKeys ? k : v;
        // Each group's indices for all rows at once, then packed row by row.
        for (int g = 0; g < groups_; ++g) {
            nearest_rows(layer, static_cast<Kind>(kind), g, rows + g * group_dim(), kv_dim_, n,
                         index.data() + static_cast<size_t>(g) * n);
        }
        for (int t = 0; t < n; ++t) {
            for (int g = 0; g < groups_; ++g) {
                const auto i = static_cast<uint32_t>(index[static_cast<size_t>(g) * n + t]);
                for (int b = 0; b < bits; ++b, ++at) {
                    if ((i >> b) & 1u) packed[at / 8] |= static_cast<uint8_t>(1u << (at % 8));
                }
            }
        }
    }
}

void KvCodebooks::decode(int layer, int n, std::span<const uint8_t> packed, float* k, float* v) const {
    if (packed.size() != packed_bytes(n) || layer < 0 || layer >= n_layer_) {
        throw make_error("{} bytes of codebook indices for {} positions of layer {} ({} expected)", packed.size(), n,
                         layer, packed_bytes(n));
    }
    const int bits = index_bits();
    const int d = group_dim();
    uint64_t at = 0;
    for (int kind = 0; kind < 2; ++kind) {
        float* rows = kind == kKeys ? k : v;
        for (int t = 0; t < n; ++t) {
            for (int g = 0; g < groups_; ++g) {
                uint32_t index = 0;
                for (int b = 0; b < bits; ++b, ++at) index |= static_cast<uint32_t>((packed[at / 8] >> (at % 8)) & 1u) << b;
                if (index >= static_cast<uint32_t>(codes_)) {
                    throw make_error("codebook index {} of layer {} is not one of its {} codes", index, layer, codes_);
                }
                std::memcpy(rows + static_cast<size_t>(t) * kv_dim_ + g * d,
                            codewords(layer, static_cast<Kind>(kind), g) + static_cast<size_t>(index) * d,
                            sizeof(float) * static_cast<size_t>(d));
            }
        }
    }
}

void KvCodebooks::save(const std::string& path) const {
    GgufWriter w;
    w.set_string("general.architecture", kArch);
    w.set_string("tessera.vq.model_fingerprint", fingerprint_);
    w.set_u32("tessera.vq.layers", static_cast<uint32_t>(n_layer_));
    w.set_u32("tessera.vq.kv_dim", static_cast<uint32_t>(kv_dim_));
    w.set_u32("tessera.vq.groups", static_cast<uint32_t>(groups_));
    w.set_u32("tessera.vq.codes", static_cast<uint32_t>(codes_));
    const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(codes_) * kv_dim_;
    for (int layer = 0; layer < n_layer_; ++layer) {
        for (int kind = 0; kind < 2; ++kind) {
            const float* src = codewords(layer, static_cast<Kind>(kind), 0);
            w.add_tensor(fmt::format("vq.{}.{}", layer, kind == kKeys ? "k" : "v"), QuantType::F32,
                         {group_dim(), codes_, groups_}, [src, bytes](uint8_t* dst, uint64_t n) {
                             std::memcpy(dst, src, std::min<uint64_t>(n, bytes));
                         });
        }
    }
    w.write(path);
}

KvCodebooks KvCodebooks::load(const std::string& path) {
    const GgufFile file(path);
    if (file.find_string("general.architecture").value_or("") != kArch) {
        throw make_error("{}: not a codebook file of tessera vq-fit", path);
    }
    const auto field = [&](const char* key, int64_t hi) {
        const int64_t v = file.get_int(key);
        if (v < 1 || v > hi) throw make_error("{}: {} = {} is out of range", path, key, v);
        return static_cast<int>(v);
    };
    KvCodebooks books(field("tessera.vq.layers", 4096), field("tessera.vq.kv_dim", 1 << 20),
                      field("tessera.vq.groups", 1 << 20), field("tessera.vq.codes", kMaxCodes),
                      file.get_string("tessera.vq.model_fingerprint"));
    for (int layer = 0; layer < books.n_layer_; ++layer) {
        for (int kind = 0; kind < 2; ++kind) {
            const std::string name = fmt::format("vq.{}.{}", layer, kind == kKeys ? "k" : "v");
            const GgufTensorInfo* t = file.find_tensor(name);
            if (t == nullptr || t->type != QuantType::F32 || t->ne[0] != books.group_dim() || t->ne[1] != books.codes_ ||
                t->ne[2] != books.groups_ || t->ne[3] != 1) {
                throw make_error("{}: tensor {} is missing or not {} x {} x {} F32", path, name, books.group_dim(),
                                 books.codes_, books.groups_);
            }
            float* words = books.codewords(layer, static_cast<Kind>(kind), 0);
            std::memcpy(words, t->data, t->n_bytes);
            for (int64_t i = 0; i < t->n_elements(); ++i) {
                if (!std::isfinite(words[i])) throw make_error("{}: tensor {} holds a value that is not finite", path, name);
            }
        }
    }
    books.refresh_norms();
    return books;
}

}  // namespace tessera
