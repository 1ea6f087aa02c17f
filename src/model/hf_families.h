// The Hugging Face architectures convert-hf knows, and for each the GGUF
// tensors llama.cpp's convert_hf_to_gguf.py writes from its checkpoint:
// which HF tensors each comes from, in which shape, and how the values are
// changed on the way (hf_convert.h writes them):
//   llama, mistral, mixtral   Q/K rows permuted per head (GGUF's llama graph
//                             rotates adjacent pairs, HF rotates halves)
//   qwen2                     biases on Q, K and V
//   qwen3, qwen3moe, gemma3   an RMSNorm of each Q and K head
//   phi3                      qkv_proj and gate_up_proj kept fused
//   gemma2, gemma3            four norms a layer; every norm's weight + 1
//                             (HF's Gemma norms multiply by 1 + w); the
//                             embedding is the output head
//   qwen3moe, mixtral         a router and experts: each expert's matrices
//                             stacked into one tensor, expert outermost
//   gpt-oss                   biases everywhere, attention sinks, a router
//                             with a bias, and experts as the checkpoint
//                             ships them: MXFP4 blocks and scales, repacked
//                             into ggml's MXFP4 blocks without a rounding;
//                             gate and up interleaved row by row in one
//                             tensor, split apart
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

enum class HfFamilyKind : uint8_t { kLlama, kQwen2, kQwen3, kPhi3, kGemma2, kGemma3, kQwen3Moe, kMixtral, kGptOss };

struct HfFamily {
    HfFamilyKind kind;
    const char* hf;    // config.json's architectures[0]
    const char* gguf;  // general.architecture
    bool gemma() const { return kind == HfFamilyKind::kGemma2 || kind == HfFamilyKind::kGemma3; }
    bool experts() const {
        return kind == HfFamilyKind::kQwen3Moe || kind == HfFamilyKind::kMixtral || kind == HfFamilyKind::kGptOss;
    }
};

// The family of architectures[0], or nullptr; the names known, for messages.
const HfFamily* find_hf_family(const std::string& hf_architecture);
std::string hf_family_names();

// Sizes from config.json that decide tensor shapes.
struct HfDims {
    int64_t n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
    int64_t n_vocab = 0;     // rows of the embedding (and output) in the checkpoint
    int64_t n_expert = 0;    // 0: dense
    int64_t n_ff_expert = 0; // each expert's width
    bool tied = false;       // no lm_head: the embedding is the output head
};

// One GGUF tensor and where its values come from.
struct HfTensorPlan {
    std::string gguf;
    // One HF tensor, or one per expert, stacked (expert outermost).
    std::vector<std::string> sources;
    std::vector<int64_t> source_shape;  // each source's shape as HF stores it (outermost first)
    int64_t permute_head_dim = 0;       // > 0: Q or K rows, permuted per head of this many rows
    float shift = 0.0f;                 // added to every value (Gemma's norms)
    int64_t keep_rows = 0;              // > 0: only the first rows (Gemma 3's embedding, cut to its tokenizer)
    bool keep_f32 = false;              // F32 whatever the chosen type (norms, biases, the router)
    // gpt-oss's experts: sources[0] is the blocks ([experts, rows, columns /
    // 32, 16] bytes) and this the scales ([experts, rows, columns / 32]),
    // written as MXFP4 whatever the chosen type.
    std::string mxfp4_scales;
    int row_parity = -1;     // 0 / 1: only the even / odd rows (gpt-oss's interleaved gate and up)
    int column_parity = -1;  // 0 / 1: only the even / odd columns (their biases)
};

// Every tensor of the family's GGUF. `prefix` is where the text model's
// tensors live ("model.", or "language_model.model." in a multimodal
// Gemma 3 checkpoint).
std::vector<HfTensorPlan> hf_tensor_plan(const HfFamily& family, const HfDims& d, const std::string& prefix);

// The source row a GGUF row comes from under the plan's permute_head_dim
// (llama.cpp's Q/K permutation, see hf_families.cpp).
int64_t permuted_source_row(int64_t row, int64_t head_dim);

}  // namespace tessera
