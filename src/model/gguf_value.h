// Metadata values of a GGUF file. Scalars are held by value; strings and
// arrays point into the file's memory map (string arrays such as a 150k-token
// vocabulary are views, not copies).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class GgufValueType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

const char* gguf_value_type_name(GgufValueType type);

// Size in bytes of a fixed-size scalar type, 0 for String and Array.
uint64_t gguf_scalar_size(GgufValueType type);

struct GgufValue {
    GgufValueType type = GgufValueType::UInt8;
    // Scalars: integers in `i` (or `u` for unsigned 64-bit), floats in `f`.
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0.0;
    std::string_view str;
    // Arrays: element type and count. Fixed-size elements stay raw in `raw`;
    // string elements are listed in `strings`; nested arrays in `items`.
    GgufValueType elem_type = GgufValueType::UInt8;
    uint64_t count = 0;
    const uint8_t* raw = nullptr;
    std::vector<std::string_view> strings;
    std::vector<GgufValue> items;

    bool is_integer() const;
    bool is_float() const { return type == GgufValueType::Float32 || type == GgufValueType::Float64; }

    // Element i of a numeric array, converted.
    double array_number(uint64_t index) const;
    int64_t array_integer(uint64_t index) const;
};

struct GgufKv {
    std::string key;
    GgufValue value;
};

}  // namespace tessera
