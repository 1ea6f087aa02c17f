// The column units of the two column-split products, wo and w_down, whose
// dot products are summed exactly (ops/fixed_sum.h): a single node
// and every tensor-parallel split add the same per-unit numbers, so --exact
// tensor parallel gives the single node's logits bit for bit. A plan splits
// KV heads and FFN channels only at unit boundaries.
//
// Units are as small as the quantization blocks allow (a unit never
// straddles a block of the weights or of their activations), and at most 8
// per matrix: each unit costs one more pass of the tile kernel per block of
// rows and positions in row layout (prompt processing of a 1.1B Q4_0 model
// lost ~6% at 1 thread and ~10% at 2 with 8 or 4 units, more with 16), and
// one more accumulator store per group in the grouped kernels (a 2048 x 2048
// Q4_0 product at 2 threads: 8 units ~6% slower than 1, 4 units ~3%). So a
// group splits a matrix over at most 8 ranks (more ranks hold none of it).
#pragma once

#include "model/llama_model.h"

namespace tessera {

struct ReductionUnits {
    int kv_heads = 1;       // KV heads (with their query heads) per unit of wo's columns
    int ffn_channels = 32;  // FFN channels per unit of w_down's columns

    int64_t wo_cols(const ModelHParams& hp) const {
        return static_cast<int64_t>(kv_heads) * hp.q_per_kv() * hp.head_dim;
    }
};

// From the model's hyper-parameters and the types of its wo and w_down
// tensors in every layer it holds.
ReductionUnits reduction_units(const LlamaModel& model);

}  // namespace tessera
