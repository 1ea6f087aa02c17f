// Vector-quantization codebooks of a model's K and V rows: the compressed
// exchange of sequence-parallel prefill (after Astra, seed 003). Per layer,
// the K row (before RoPE: positions are put back by the receiver) and the V
// row of all KV heads, kv_dim values each, are cut into `groups` groups of
// kv_dim / groups values; each group travels as the index of its nearest
// codeword among `codes` (ceil(log2(codes)) bits). Fitted offline on the
// model's own rows (eval/vq_fit.h) and stored in a small GGUF that names
// the model's fingerprint, so codebooks of another model are refused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

class KvCodebooks {
public:
    enum Kind { kKeys = 0, kValues = 1 };

    // Zero codewords, to be fitted.
    KvCodebooks(int n_layer, int kv_dim, int groups, int codes, std::string fingerprint);
    // Reads a codebook file, checking its shape; throws an Error naming the
    // file for anything malformed.
    static KvCodebooks load(const std::string& path);
    void save(const std::string& path) const;

    int n_layer() const { return n_layer_; }
    int kv_dim() const { return kv_dim_; }
    int groups() const { return groups_; }
    int codes() const { return codes_; }
    int group_dim() const { return kv_dim_ / groups_; }
    int index_bits() const;
    const std::string& fingerprint() const { return fingerprint_; }
    // A digest of the shape and codewords (16 hex digits): nodes check they
    // hold the same codebooks.
    std::string digest() const;
    // Bits one position of one layer takes on the wire (K and V).
    int bits_per_position() const { return 2 * groups_ * index_bits(); }
    // Bytes of n positions' indices of one layer, K and V.
    uint64_t packed_bytes(int n) const;

    // A model's codebooks: throws an Error when these were fitted on another
    // model (fingerprint) or do not fit its shape.
    void require_model(const std::string& fingerprint, int n_layer, int kv_dim) const;

    // The codes x group_dim codewords of one group.
    float* codewords(int layer, Kind kind, int group);
    const float* codewords(int layer, Kind kind, int group) const;

    // n rows of kv_dim values (row-major) to their indices, `groups` per row,
    // packed (K rows' indices, then V rows'); and back.
    void encode(int layer, int n, const float* k, const float* v, std::vector<uint8_t>& packed) const;
    void decode(int layer, int n, std::span<const uint8_t> packed, float* k, float* v) const;
    // The index of the codeword nearest to one group's values.
    int nearest(int layer, Kind kind, int group, const float* x) const;
    // The same for n rows (row t's group at rows + t * row_stride floats),
    // as tiles of dot products: |c|^2 - 2 x.c, smallest first (ties: the
    // lower index). The codeword norms must be current (refresh_norms).
    void nearest_rows(int layer, Kind kind, int group, const float* rows, int64_t row_stride, int n, int* out) const;
    // Recomputes the codeword norms after the codewords changed.
    void refresh_norms();

private:
    int n_layer_, kv_dim_, groups_, codes_;
    std::string fingerprint_;
    std::vector<float> words_;  // [layer][kind][group][code][group_dim]
    std::vector<float> norms_;  // [layer][kind][group][code]: |codeword|^2
};

}  // namespace tessera
