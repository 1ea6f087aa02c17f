// A Hugging Face .safetensors file read as hostile input (convert-hf): an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) byte range in the data that follows, then the
// data. Every number is checked before it is used: the header fits the file
// (and 100 MiB), each range lies inside the data, matches its dtype and shape
// (overflow-checked), and the ranges neither overlap nor leave holes, as the
// format requires. Errors name the file and the tensor.
#pragma once

#include "util/mapped_file.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tessera {

// The dtypes of the format (safetensors' names); convert-hf reads F32, F16
// and BF16 and refuses the others by name.
enum class SafetensorsDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };
const char* safetensors_dtype_name(SafetensorsDtype d);
uint64_t safetensors_dtype_bytes(SafetensorsDtype d);

struct SafetensorsTensor {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::F32;
    std::vector<int64_t> shape;  // outermost first, as HF writes it ([rows, columns] for a matrix)
    uint64_t begin = 0, end = 0;  // in the data section
    uint64_t elements() const;
};

// The largest header accepted: HF's own readers cap it at 100 MB.
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

class SafetensorsFile {
public:
    // Maps and checks the file; throws an Error naming it on anything wrong.
    explicit SafetensorsFile(const std::string& path);
    // The same checks over bytes already in memory (tests, fuzzing); `name`
    // stands for the file in errors. The bytes must outlive the object.
    SafetensorsFile(std::span<const uint8_t> bytes, std::string name);

    const std::string& path() const { return name_; }
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    // The tensor of that name, or null.
    const SafetensorsTensor* find(const std::string& name) const;
    // A tensor's bytes (inside the mapping).
    std::span<const uint8_t> data(const SafetensorsTensor& t) const;
    // The header's "__metadata__" (string to string), empty when absent.
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    void parse(std::span<const uint8_t> bytes);

    std::string name_;
    MappedFile file_;
    const uint8_t* data_ = nullptr;  // the data section
    uint64_t data_bytes_ = 0;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t> index_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace tessera
