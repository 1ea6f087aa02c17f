#include "model/reduction_units.h"

#include "ops/quant_traits.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tessera {

namespace {

constexpr int kMaxUnits = 8;

// Columns a unit boundary must be a multiple of for a weight of this type:
// its blocks and those of the activation type it is multiplied with.
int64_t column_alignment(QuantType type) {
    const QuantTraits& traits = require_weight_traits(type, "reduction units");
    return std::lcm(layout_of(type).block_size, layout_of(traits.vec_dot_type).block_size);
}

}  // namespace

ReductionUnits reduction_units(const LlamaModel& model) {
    const ModelHParams& hp = model.hparams();
    int64_t wo_align = 1;
    int64_t down_align = 32;  // FFN channels move in blocks of at least 32
    for (int l = 0; l < hp.n_layer; ++l) {
        // A slice file holds only its layers.
        if (const GgufTensorInfo* t = model.file().find_tensor(fmt::format("blk.{}.attn_output.weight", l))) {
            wo_align = std::lcm(wo_align, column_alignment(t->type));
        }
        for (const char* down : {"ffn_down", "ffn_down_exps"}) {
            if (const GgufTensorInfo* t = model.file().find_tensor(fmt::format("blk.{}.{}.weight", l, down))) {
                down_align = std::lcm(down_align, column_alignment(t->type));
            }
        }
    }
    ReductionUnits units;
    const int64_t head_cols = static_cast<int64_t>(hp.q_per_kv()) * hp.head_dim;
    units.kv_heads = std::max(1, (hp.n_head_kv + kMaxUnits - 1) / kMaxUnits);
    while (units.kv_heads < hp.n_head_kv && (units.kv_heads * head_cols) % wo_align != 0) ++units.kv_heads;
    if ((units.kv_heads * head_cols) % wo_align != 0) units.kv_heads = std::max(1, hp.n_head_kv);
    const int64_t granules = (hp.n_ff + down_align - 1) / down_align;
    units.ffn_channels = static_cast<int>(down_align * ((granules + kMaxUnits - 1) / kMaxUnits));
    return units;
}

}  // namespace tessera
