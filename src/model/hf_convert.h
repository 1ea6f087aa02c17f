// tessera convert-hf: a Hugging Face checkpoint folder (hf_checkpoint.h) to
// the GGUF llama.cpp's convert_hf_to_gguf.py writes for it: the same tensor
// names, shapes and metadata keys (the families of model/hf_families.h), the
// same transforms (the Q/K row permutation of Llama-family checkpoints,
// Gemma's norms + 1, experts stacked), the tokenizer and chat
// template through convert-tokenizer's code, the weights in the chosen type.
// Tensors are converted row by row from the mapped shards, each shard's
// pages released as it is read: memory stays near one row, whatever the
// model's size. What it cannot convert (an architecture, a dtype, a rope
// scaling, a tensor it does not know) is refused by name.
#pragma once

#include "ops/quant_type.h"

#include <functional>
#include <string>

namespace tessera {

struct HfConvertOptions {
    std::string dir;     // the checkpoint folder
    std::string output;  // the GGUF to write
    // F32, F16, BF16 or a block type (Q8_0, ...): 2D weights in it; norms
    // and other 1D tensors stay F32, as llama.cpp's converter keeps them.
    QuantType type = QuantType::F16;
    std::string name;  // general.name (default: the folder's name)
};

void convert_hf(const HfConvertOptions& options, const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera
