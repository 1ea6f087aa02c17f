// llama-quantize's targets and mixes: the names a user types ("Q4_K_M"), the
// file type each writes (general.file_type, llama.cpp's LLAMA_FTYPE), and
// the type each weight matrix gets under that target's mix, rule for rule as
// llama.cpp's llama_tensor_get_type (output.weight at Q6_K; more bits for
// some attn_v, ffn_down, attn_output and attn_qkv matrices depending on the
// mix, the layer, grouped-query attention and the expert count), so a file
// quantized here has the types a llama-quantize file of the same name has.
#pragma once

#include "ops/quant_type.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

// A target as llama-quantize names it.
struct QuantizeTarget {
    std::string name;    // "Q4_K_M"
    QuantType type;      // the type of most weight matrices
    uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_* for general.file_type
    // false: only the output.weight rule every quantized target has (the
    // names of bare types such as "Q4_K", which llama-quantize lacks).
    bool mix = true;
};

// Whether a matrix of `type` needs an importance matrix under `target`, as
// llama-quantize refuses it without one (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ1_*; Q2_K in a Q2_K_S file); never token_embd or output.weight.
bool requires_importance(const QuantizeTarget& target, const std::string& name, QuantType type);

// A target by name, any case (e.g. "q4_k_m", "IQ4_XS", "F16"); nothing if unknown.
std::optional<QuantizeTarget> parse_quantize_target(const std::string& name);
// The accepted names, for help and error messages.
std::string quantize_target_names();

// What a mix looks at besides a tensor's name.
struct MixModel {
    std::string arch;        // general.architecture
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int n_expert = 0;
    bool has_output = false;  // an output.weight of its own (else token_embd is the output)
    int n_attn_v = 0;         // attn_v matrices in the file
    bool has_imatrix = false; // quantized with an importance matrix (some rules differ)

    int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};

// The type `target`'s mix gives the weight matrix `name` with ne[0] = cols
// and ne[2] = stacked (a mixture of experts' 3-D tensor: its expert count;
// 1 for a matrix); i_attn_v counts the attn_v matrices before it in the file
// (llama.cpp counts them in file order). The target's type where no rule
// applies.
QuantType mixed_type(const QuantizeTarget& target, const std::string& name, int64_t cols, int64_t stacked, int i_attn_v,
                     const MixModel& model);

}  // namespace tessera
