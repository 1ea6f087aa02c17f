// A read-only view of a 2-D weight tensor as GGUF stores it: `rows` rows of
// `cols` elements each, row-major, each row `row_bytes` long. The bytes live in
// the model file's memory map or in a slice's packed copy; a Matrix never owns
// them.
#pragma once

#include "ops/quant_type.h"

#include <cstdint>

namespace tessera {

struct Matrix {
    QuantType type = QuantType::F32;
    int64_t cols = 0;
    int64_t rows = 0;
    uint64_t row_bytes = 0;
    const uint8_t* data = nullptr;
    // First row and column of the whole tensor that this view holds: nonzero
    // when a slice keeps only its rows or columns (a packed copy, or a slice
    // file holding just one rank's share; see load_slice_weights).
    int64_t row_begin = 0;
    int64_t col_begin = 0;
    // Rows stored in groups of 16 (ops/row_groups.h), in column panels of
    // panel_cols columns (GroupPanels); only private copies are (see
    // copy_to_private_memory). Such a matrix has no rows to point at: read it
    // through matmul.
    bool grouped = false;
    int64_t panel_cols = 0;
    // A factor every dot product with a row is multiplied by, unit by unit
    // (ops/matmul.h): the per-tensor `<name>.scale` of NVFP4 files converted
    // from ModelOpt checkpoints (model/llama_model.cpp). 1: none.
    float out_scale = 1.0f;

    // Row r of the whole tensor (row_begin <= r < row_begin + rows) of a
    // matrix in row layout.
    const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r - row_begin) * row_bytes; }
    int64_t row_end() const { return row_begin + rows; }
};

}  // namespace tessera
