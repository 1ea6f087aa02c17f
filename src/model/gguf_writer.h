// Writes GGUF version 3 files: metadata in the order it was set, then the
// tensor table, then each tensor's bytes at `general.alignment`. Tensor bytes
// come from a fill callback, called one tensor (or one run of rows) at a
// time while writing, so a multi-gigabyte model is written with one tensor
// (or one run of rows) in memory at a time. The
// output is a pure function of what was added (same input, same bytes).
#pragma once

#include "model/gguf_value.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

class GgufWriter {
public:
    using Fill = std::function<void(uint8_t* dst, uint64_t n_bytes)>;

    void set_u32(const std::string& key, uint32_t value);
    void set_i32(const std::string& key, int32_t value);
    void set_u64(const std::string& key, uint64_t value);
    void set_f32(const std::string& key, float value);
    void set_bool(const std::string& key, bool value);
    void set_string(const std::string& key, const std::string& value);
    void set_string_array(const std::string& key, const std::vector<std::string>& values);
    void set_f32_array(const std::string& key, const std::vector<float>& values);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& values);
    // Copies a value read from another GGUF file (any type, nested arrays too).
    void set_value(const std::string& key, const GgufValue& value);

    // ne[0] is the contiguous dimension, as in GGUF.
    void add_tensor(const std::string& name, QuantType type, const std::vector<int64_t>& ne, Fill fill);
    // The same, its bytes asked for a run of rows at a time (at most the
    // row chunk's bytes, at least one row; rows counted over every dimension
    // but ne[0]), in order: a tensor larger than memory is written through a
    // buffer of one chunk (convert-hf's 2 GiB F32 embedding of an 8B model).
    using FillRows = std::function<void(uint8_t* dst, int64_t first_row, int64_t n_rows)>;
    void add_tensor_rows(const std::string& name, QuantType type, const std::vector<int64_t>& ne, FillRows fill);
    void set_row_chunk_bytes(uint64_t bytes) { row_chunk_bytes_ = bytes; }  // default 32 MiB

    // Every tensor's bytes zero, left as holes of a sparse file (no fill is
    // called, no disk space taken): a file of a model's real shape for
    // planning (tessera plan), whose weights compute nothing.
    void set_zero_data(bool zero) { zero_data_ = zero; }

    // Writes the file; throws Error naming the path on an I/O failure. The
    // optional progress callback is called after each tensor with (done, total).
    void write(const std::string& path, const std::function<void(size_t, size_t)>& progress = {}) const;

private:
    struct Entry {
        std::string key;
        std::vector<uint8_t> bytes;  // value type + value, serialized
    };
    struct Tensor {
        std::string name;
        QuantType type;
        std::vector<int64_t> ne;
        uint64_t n_bytes;
        Fill fill;
        FillRows fill_rows;  // instead of fill
    };
    void set_entry(const std::string& key, std::vector<uint8_t> bytes);

    std::vector<Entry> metadata_;
    std::vector<Tensor> tensors_;
    uint32_t alignment_ = 32;
    bool zero_data_ = false;
    uint64_t row_chunk_bytes_ = 32u << 20;
};

}  // namespace tessera
