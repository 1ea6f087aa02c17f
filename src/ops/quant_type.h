// Tensor element types, numbered as GGUF/ggml numbers them so a type id read
// from a file is a QuantType with no translation. The layout table knows the
// block size and bytes of many more types than we compute with, so the GGUF
// reader can size-check any tensor table; `compute_traits` (quant_traits.h)
// says which types the engine can actually run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

enum class QuantType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
    // Not a GGUF type: BF16 values whose products take F32 activations, for
    // a router stored as F32 whose values are all BF16 values, held at half
    // its size with the F32 router's products (model/llama_model.cpp).
    // BF16 itself takes BF16 activations (ops/float_canonical.h), as ggml's.
    BF16_F32ACT = 1030,
};

// Internal types are never read from a file nor named by a user.
inline bool is_internal_type(QuantType type) { return static_cast<uint32_t>(type) >= 1000; }

// How a type packs elements: `block_size` elements take `block_bytes` bytes.
struct QuantLayout {
    QuantType type;
    const char* name;
    int64_t block_size;
    uint64_t block_bytes;
};

// The layout of a type id from a file, or nothing if the id is unknown.
std::optional<QuantLayout> quant_layout(uint32_t type_id);

// The layout of a known type (never fails).
const QuantLayout& layout_of(QuantType type);

// A type of blocks of several values (the quantized types), not one value a
// number (F32, F16, BF16).
inline bool is_block_quantized(QuantType type) { return layout_of(type).block_size > 1; }

const char* quant_type_name(QuantType type);

// Parses "f32", "F16", "q8_0", "Q4_0", ... ; nothing if unknown.
std::optional<QuantType> parse_quant_type(const std::string& name);

}  // namespace tessera
