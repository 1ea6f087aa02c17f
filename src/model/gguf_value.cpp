#include "model/gguf_value.h"

#include <cstring>

namespace tessera {

const char* gguf_value_type_name(GgufValueType type) {
    switch (type) {
        case GgufValueType::UInt8: return "uint8";
        case GgufValueType::Int8: return "int8";
        case GgufValueType::UInt16: return "uint16";
        case GgufValueType::Int16: return "int16";
        case GgufValueType::UInt32: return "uint32";
        case GgufValueType::Int32: return "int32";
        case GgufValueType::Float32: return "float32";
        case GgufValueType::Bool: return "bool";
        case GgufValueType::String: return "string";
        case GgufValueType::Array: return "array";
        case GgufValueType::UInt64: return "uint64";
        case GgufValueType::Int64: return "int64";
        case GgufValueType::Float64: return "float64";
    }
    return "unknown";
}

uint64_t gguf_scalar_size(GgufValueType type) {
    switch (type) {
        case GgufValueType::UInt8:
        case GgufValueType::Int8:
        case GgufValueType::Bool: return 1;
        case GgufValueType::UInt16:
        case GgufValueType::Int16: return 2;
        case GgufValueType::UInt32:
        case GgufValueType::Int32:
        case GgufValueType::Float32: return 4;
        case GgufValueType::UInt64:
        case GgufValueType::Int64:
        case GgufValueType::Float64: return 8;
        case GgufValueType::String:
        case GgufValueType::Array: return 0;
    }
    return 0;
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufValueType::UInt8:
        case GgufValueType::Int8:
        case GgufValueType::UInt16:
        case GgufValueType::Int16:
        case GgufValueType::UInt32:
        case GgufValueType::Int32:
        case GgufValueType::UInt64:
        case GgufValueType::Int64:
        case GgufValueType::Bool: return true;
        default: return false;
    }
}

namespace {
template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
}  // namespace

double GgufValue::array_number(uint64_t index) const {
    const uint8_t* p = raw + index * gguf_scalar_size(elem_type);
    switch (elem_type) {
        case GgufValueType::Float32: return load<float>(p);
        case GgufValueType::Float64: return load<double>(p);
        default: return static_cast<double>(array_integer(index));
    }
}

int64_t GgufValue::array_integer(uint64_t index) const {
    const uint8_t* p = raw + index * gguf_scalar_size(elem_type);
    switch (elem_type) {
        case GgufValueType::UInt8:
        case GgufValueType::Bool: return load<uint8_t>(p);
        case GgufValueType::Int8: return load<int8_t>(p);
        case GgufValueType::UInt16: return load<uint16_t>(p);
        case GgufValueType::Int16: return load<int16_t>(p);
        case GgufValueType::UInt32: return load<uint32_t>(p);
        case GgufValueType::Int32: return load<int32_t>(p);
        case GgufValueType::UInt64: return static_cast<int64_t>(load<uint64_t>(p));
        case GgufValueType::Int64: return load<int64_t>(p);
        case GgufValueType::Float32:
        case GgufValueType::Float64: {
            // A float read as an integer: out-of-range or NaN values become 0
            // rather than undefined behaviour.
            const double d = elem_type == GgufValueType::Float32 ? load<float>(p) : load<double>(p);
            return (d > -9.2e18 && d < 9.2e18) ? static_cast<int64_t>(d) : 0;
        }
        default: return 0;
    }
}

}  // namespace tessera
