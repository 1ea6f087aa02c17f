// `tessera quantize`: rewrite a GGUF model with its weight matrices in another
// type, as llama-quantize does. Metadata is copied (general.file_type set to
// llama.cpp's LLAMA_FTYPE number of the target), 1-D tensors (norms) are
// copied as they are, and every 2-D weight is converted row by row on a
// thread pool: rows of the source type -> floats -> rows of the new type.
//
// Which type each matrix gets is decided first, for the whole file, by
// plan_quantization (a pure function of the file and the target, so it is
// testable and printable before any byte is written):
//   - the target's type, or llama.cpp's mix for the target (quant_mix.h:
//     output.weight at Q6_K for every quantized target but Q8_0, more bits
//     for some attn_v / ffn_down / attn_output layers; --pure turns mixes off).
//     A type of the mix this build cannot write is replaced by the target's
//     type, and the plan says so;
//   - a fallback when the row length is not a multiple of that type's block
//     (a K-quant needs rows of 256): the next type of at least the same
//     quality whose block fits, as llama.cpp's (Q4_K -> Q5_0, Q5_K -> Q5_1,
//     Q6_K -> Q8_0, Q2_K / Q3_K -> Q4_0, IQ4_XS and the grid I-quants -> IQ4_NL; else F16).
#pragma once

#include "model/gguf_file.h"
#include "model/importance_matrix.h"
#include "model/quant_mix.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct QuantizeParams {
    QuantizeTarget target;
    int n_threads = 1;
    bool pure = false;              // no llama.cpp mix: every matrix gets target.type
    bool allow_requantize = false;  // accept already-quantized source matrices
    // llama-quantize's --imatrix (caller-owned; nullptr: none): matrices it
    // names quantize with llama.cpp's importance-weighted quantizers, the
    // mixes take their importance-matrix rules, and the targets that need
    // one (IQ2_*, IQ3_XXS, Q2_K_S) become possible.
    const ImportanceMatrix* importance = nullptr;
};

// What happens to one tensor.
struct TensorQuantPlan {
    std::string name;
    std::vector<int64_t> ne;   // GGUF dims, ne[0] contiguous
    QuantType from;            // type in the source file
    QuantType mixed;           // type llama.cpp's mix gives it (the target's type without a mix)
    QuantType wanted;          // mixed, or the target's type if this build cannot write mixed
    QuantType to;              // type written (wanted, or its fallback)
    bool converted = false;    // false: bytes copied unchanged
    const std::vector<float>* importance = nullptr;  // its importance-matrix values (ne[0], or ne[0] per expert), if any
    // NVFP4 with a factor per tensor (per expert) written beside it as
    // `<name>.scale`, as ModelOpt quantizes (quantize_model.cpp).
    bool second_level = false;
    uint64_t bytes_in = 0;
    uint64_t bytes_out = 0;
    bool fell_back() const { return to != wanted; }
    bool mix_unavailable() const { return mixed != wanted; }
};

// Decides every tensor's type; throws an Error (naming the tensor) when a
// source type cannot be converted or requantizing was not allowed, when the
// target type cannot be written by this build, when a matrix's type needs an
// importance matrix that does not cover it, and when the importance matrix's
// size for a matrix is not its column count (a matrix of another model).
std::vector<TensorQuantPlan> plan_quantization(const GgufFile& in, const QuantizeParams& params);

struct QuantizeSummary {
    std::vector<TensorQuantPlan> tensors;
    uint64_t file_bytes_in = 0;
    uint64_t file_bytes_out = 0;
    double seconds = 0.0;
};

// Writes the converted model to out_path. `progress` is called after each
// tensor is written with its plan, the count done and the total.
QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeParams& params,
                               const std::function<void(const TensorQuantPlan&, size_t, size_t)>& progress = {});

}  // namespace tessera
