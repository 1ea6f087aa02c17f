// What a family's GGUF says beyond Llama's keys, read from its config.json,
// and what llama.cpp's graph for it requires of that config: anything the
// graph would compute otherwise than transformers is refused naming the
// field, rather than converted into a model that runs and gives other
// numbers.
#pragma once

#include "model/hf_config.h"
#include "model/hf_families.h"

namespace tessera {

class GgufWriter;

// Gemma 2 and 3: soft caps, the sliding window and (Gemma 3) its period and
// the local layers' RoPE base; the query scale, the activation.
void write_gemma_keys(const HfConfig& c, const HfDims& d, const HfFamily& family, GgufWriter& w);

// gpt-oss: the clamped SwiGLU at 7, a window on every other layer from the
// first, the experts in MXFP4 of whole blocks.
void check_gpt_oss(const HfConfig& c, const HfDims& d);

}  // namespace tessera
