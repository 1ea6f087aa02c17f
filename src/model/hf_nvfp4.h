// NVIDIA ModelOpt's NVFP4 checkpoints (the FP4 weights NVIDIA publishes for
// Llama, Qwen 3, DeepSeek, gpt-oss...), as convert-hf reads them: each
// quantized linear layer's `weight` is U8 [rows, cols / 2] (element 2k in the
// low nibble, 2k + 1 in the high), its `weight_scale` F8_E4M3
// [rows, cols / 16] (one scale per 16 elements), `weight_scale_2` an F32
// factor of the whole tensor and `input_scale` the activations' (for FP4
// tensor cores). ggml's NVFP4 blocks (ops/quant_blocks.h) hold the same codes
// and the same scale bits, repacked 64 elements a block: no value is rounded.
// The factor goes beside the weight as `<name>.scale` ([1], or one per
// expert of a stacked tensor), which the loader applies to every product, and
// the input scale as `<name>.input_scale`, as llama.cpp's converter writes
// them.
#pragma once

#include <string>
#include <vector>

namespace tessera {

class GgufWriter;
class HfCheckpoint;
struct HfTensorPlan;

// Whether the checkpoint says it is ModelOpt NVFP4 (config.json's
// quantization_config, or hf_quant_config.json beside it). An Error for a
// ModelOpt checkpoint of another algorithm (FP8, W4A8_AWQ, ...), which
// convert-hf cannot read.
bool modelopt_nvfp4(const HfCheckpoint& checkpoint);

// Whether the HF weight `name` is an NVFP4 weight of such a checkpoint (it
// has a `weight_scale` beside it).
bool nvfp4_weight(const HfCheckpoint& checkpoint, const std::string& name);

// The tensors that come with an NVFP4 weight (those present of
// weight_scale, weight_scale_2, input_scale); none for another weight.
std::vector<std::string> nvfp4_companions(const HfCheckpoint& checkpoint, const std::string& name);

// The plan's tensor from NVFP4 sources (one, or one per expert): the
// blocks, then its `.scale` and `.input_scale`. An Error naming the shard
// for a source of another dtype or shape, or rows of a length ggml's blocks
// of 64 do not divide.
void add_nvfp4_tensor(const HfCheckpoint& checkpoint, const HfTensorPlan& t, GgufWriter& writer);

}  // namespace tessera
