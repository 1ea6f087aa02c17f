// A GGUF file (versions 2 and 3, little-endian): its metadata, its tensor
// table and its weights, memory-mapped. Everything read from the file is
// checked against the file size with overflow-checked arithmetic before use;
// any problem is an Error "FILE: what is wrong at offset N".
#pragma once

#include "model/gguf_value.h"
#include "ops/quant_type.h"
#include "util/mapped_file.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read little-endian
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
    std::string name;
    int n_dims = 0;
    int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] is the innermost (contiguous) dimension
    QuantType type = QuantType::F32;
    uint64_t offset = 0;  // from the start of the data section
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
public:
    // Opens and validates `path`. Throws Error on any malformed content.
    explicit GgufFile(const std::string& path);

    const std::string& path() const { return file_.path(); }
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t file_size() const { return file_.size(); }
    uint64_t data_offset() const { return data_offset_; }
    // 64-bit hash of the header, metadata and tensor table (every byte before
    // the tensor data): two files with the same fingerprint hold the same model
    // description. Distributed modes compare it at handshake.
    uint64_t fingerprint() const { return fingerprint_; }
    std::string fingerprint_hex() const;

    const std::vector<GgufKv>& metadata() const { return metadata_; }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

    const GgufValue* find(const std::string& key) const;
    const GgufTensorInfo* find_tensor(const std::string& name) const;

    // Typed accessors. The required forms throw an Error naming the file and key.
    std::string get_string(const std::string& key) const;
    std::optional<std::string> find_string(const std::string& key) const;
    int64_t get_int(const std::string& key) const;
    std::optional<int64_t> find_int(const std::string& key) const;
    std::optional<double> find_float(const std::string& key) const;
    std::optional<bool> find_bool(const std::string& key) const;
    // An array value with the given element type, or nullptr if absent. Throws
    // if the key holds something else.
    const GgufValue* find_array(const std::string& key, GgufValueType elem_type) const;

private:
    void parse();

    MappedFile file_;
    uint32_t version_ = 0;
    uint32_t alignment_ = kGgufDefaultAlignment;
    uint64_t data_offset_ = 0;
    uint64_t fingerprint_ = 0;
    std::vector<GgufKv> metadata_;
    std::vector<GgufTensorInfo> tensors_;
    std::unordered_map<std::string, size_t> metadata_index_;
    std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tessera
