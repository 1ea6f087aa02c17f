// Each grouped type's codec (ops/row_groups.h): how a row's block goes into
// a group block and back, and the canonical order's step over one block of
// one row. row_groups.cpp reads them through this table, so a new grouped
// type is one entry here, its layout header and its kernels.
#pragma once

#include "ops/quant_type.h"

#include <cstddef>
#include <cstdint>

namespace tessera {

struct GroupCodec {
    QuantType type;
    int block_size;            // elements per block (or super-block)
    size_t row_block_bytes;    // one row's block in GGUF's layout
    size_t group_block_bytes;  // 16 rows' block in the group layout
    uint8_t pad_code_byte;     // what a padding row's code bytes hold (Q8_0's + 128: 0x80)
    size_t codes_offset;       // where the code bytes start in a group block (for the padding)
    // Row r's block (GGUF bytes) into / out of group block g; put ORs into
    // g's zeroed bytes (for its row's bits), get writes the whole block.
    void (*put)(const uint8_t* block, int r, uint8_t* g);
    void (*get)(const uint8_t* g, int r, uint8_t* block);
    // acc + row r's dot product with one activation block (the type's
    // vec_dot_type), in the canonical order; nullptr for the float types,
    // whose canonical order (ops/float_canonical.h) keeps 16 lanes per row
    // that no sum resumes: a unit's dot product starts from zero lanes.
    float (*step)(const uint8_t* g, int r, const uint8_t* x_block, float acc);
};

// The codec of a grouped type, or nullptr.
const GroupCodec* group_codec(QuantType type);

}  // namespace tessera
