// One tensor of convert-hf's plan (hf_families.h) into the GGUF writer: its
// sources checked against the plan (present, F32/F16/BF16 or gpt-oss's U8
// MXFP4 blocks and scales, of the planned shape, experts of one dtype), an
// Error naming the shard otherwise; its rows converted when the writer asks
// for them (Q/K rows permuted per head, Gemma's shift, even or odd rows or
// columns, experts stacked), each shard's pages released as they are read.
#pragma once

#include "ops/quant_type.h"

namespace tessera {

class GgufWriter;
class HfCheckpoint;
struct HfTensorPlan;

// `chosen`: the type of matrices (F32, F16, BF16 or a block type); vectors
// and the plan's keep_f32 tensors are F32, MXFP4 experts stay MXFP4.
void add_hf_tensor(const HfCheckpoint& checkpoint, QuantType chosen, const HfTensorPlan& t, GgufWriter& writer);

}  // namespace tessera
