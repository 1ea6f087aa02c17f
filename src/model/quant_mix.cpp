#include "model/quant_mix.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace tessera {

namespace {

// llama.cpp's LLAMA_FTYPE numbers (llama.h).
enum Ftype : uint32_t {
    kAllF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ8_0 = 7,
    kQ5_0 = 8,
    kQ5_1 = 9,
    kQ2_K = 10,
    kQ3_K_S = 11,
    kQ3_K_M = 12,
    kQ3_K_L = 13,
    kQ4_K_S = 14,
    kQ4_K_M = 15,
    kQ5_K_S = 16,
    kQ5_K_M = 17,
    kQ6_K = 18,
    kIQ2_XXS = 19,
    kIQ2_XS = 20,
    kQ2_K_S = 21,
    kIQ3_XS = 22,
    kIQ3_XXS = 23,
    kIQ1_S = 24,
    kIQ4_NL = 25,
    kIQ3_S = 26,
    kIQ3_M = 27,
    kIQ2_S = 28,
    kIQ2_M = 29,
    kIQ4_XS = 30,
    kIQ1_M = 31,
    kBF16 = 32,
    kMXFP4_MOE = 38,
    kNVFP4 = 39,
    kQ1_0 = 40,
    kQ2_0 = 41,
    kTQ1_0 = 36,
    kTQ2_0 = 37,
};

const std::array<QuantizeTarget, 40> kTargets{{
    {"F32", QuantType::F32, kAllF32},
    {"F16", QuantType::F16, kF16},
    {"BF16", QuantType::BF16, kBF16},
    {"Q8_0", QuantType::Q8_0, kQ8_0},
    {"Q6_K", QuantType::Q6_K, kQ6_K},
    {"Q5_K_M", QuantType::Q5_K, kQ5_K_M},
    {"Q5_K_S", QuantType::Q5_K, kQ5_K_S},
    {"Q5_1", QuantType::Q5_1, kQ5_1},
    {"Q5_0", QuantType::Q5_0, kQ5_0},
    {"Q4_K_M", QuantType::Q4_K, kQ4_K_M},
    {"Q4_K_S", QuantType::Q4_K, kQ4_K_S},
    {"Q4_1", QuantType::Q4_1, kQ4_1},
    {"Q4_0", QuantType::Q4_0, kQ4_0},
    {"IQ4_NL", QuantType::IQ4_NL, kIQ4_NL},
    {"IQ4_XS", QuantType::IQ4_XS, kIQ4_XS},
    {"Q3_K_L", QuantType::Q3_K, kQ3_K_L},
    {"Q3_K_M", QuantType::Q3_K, kQ3_K_M},
    {"Q3_K_S", QuantType::Q3_K, kQ3_K_S},
    {"Q2_K", QuantType::Q2_K, kQ2_K},
    // The I-quant mixes. llama.cpp's names are not their main types: IQ2_S's
    // matrices are mostly IQ2_XS, IQ2_M's IQ2_S, IQ3_XS's and IQ3_M's IQ3_S.
    {"IQ3_M", QuantType::IQ3_S, kIQ3_M},
    {"IQ3_S", QuantType::IQ3_S, kIQ3_S},
    {"IQ3_XS", QuantType::IQ3_S, kIQ3_XS},
    {"IQ3_XXS", QuantType::IQ3_XXS, kIQ3_XXS},
    {"IQ2_M", QuantType::IQ2_S, kIQ2_M},
    {"IQ2_S", QuantType::IQ2_XS, kIQ2_S},
    {"IQ2_XS", QuantType::IQ2_XS, kIQ2_XS},
    {"IQ2_XXS", QuantType::IQ2_XXS, kIQ2_XXS},
    {"Q2_K_S", QuantType::Q2_K, kQ2_K_S},
    {"IQ1_M", QuantType::IQ1_M, kIQ1_M},
    {"IQ1_S", QuantType::IQ1_S, kIQ1_S},
    // 1-bit signs (PrismML's Bonsai files): every matrix but output.weight.
    {"Q1_0", QuantType::Q1_0, kQ1_0},
    // 2-bit codes (-1, 0, 1, 2 times a block's scale): every matrix but the
    // embedding (Q4_K, llama.cpp's rule for this and the ternary targets) and
    // output.weight (Q6_K).
    {"Q2_0", QuantType::Q2_0, kQ2_0},
    // Ternary codes (BitNet b1.58 and TriLM files), under the same rules.
    {"TQ1_0", QuantType::TQ1_0, kTQ1_0},
    {"TQ2_0", QuantType::TQ2_0, kTQ2_0},
    // gpt-oss's: expert matrices (3-D) MXFP4, everything else Q8_0.
    {"MXFP4_MOE", QuantType::MXFP4, kMXFP4_MOE},
    // Bare K-quant types, which llama-quantize does not name: --pure's files
    // of the mix with that type (llama.cpp writes Q4_K_M's file type for a
    // --pure Q4_K_M), only output.weight kept at Q6_K.
    {"Q4_K", QuantType::Q4_K, kQ4_K_M, false},
    {"Q5_K", QuantType::Q5_K, kQ5_K_M, false},
    {"Q3_K", QuantType::Q3_K, kQ3_K_M, false},
    // Every matrix MXFP4 but output.weight (Q8_0), the file type gpt-oss's.
    {"MXFP4", QuantType::MXFP4, kMXFP4_MOE, false},
    // NVIDIA's 4-bit floats (the type of ModelOpt checkpoints, which
    // llama-quantize does not write): every matrix but the embedding (Q8_0)
    // and output.weight (Q6_K), each with its factor (quantize_model.cpp).
    {"NVFP4", QuantType::NVFP4, kNVFP4, false},
}};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama.cpp's use_more_bits: the first and last eighth of the layers, and
// every third layer in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// "blk.12.ffn_down.weight" -> 12; -1 outside the blocks.
int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    size_t i = 4;
    if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
    int layer = 0;
    for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) layer = layer * 10 + (name[i] - '0');
    return layer;
}

}  // namespace

std::optional<QuantizeTarget> parse_quantize_target(const std::string& name) {
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    for (const auto& t : kTargets) {
        if (t.name == upper) return t;
    }
    return std::nullopt;
}

std::string quantize_target_names() {
    std::string names;
    for (const auto& t : kTargets) {
        if (!names.empty()) names += ", ";
        names += t.name;
    }
    return names;
}

QuantType mixed_type(const QuantizeTarget& target, const std::string& name, int64_t cols, int64_t stacked, int i_attn_v,
                     const MixModel& model) {
    const QuantType base = target.type;
    if (!is_block_quantized(base)) return base;  // F32, F16, BF16: no mix
    const uint32_t ftype = target.file_type;
    const bool falcon = model.arch == "falcon";
    const bool has_imatrix = model.has_imatrix;
    // The output projection (or the tied embedding in its place) stays at
    // Q6_K: the logits are the model's most sensitive product.
    if (name == "output.weight" || (!model.has_output && name == "token_embd.weight")) {
        if (ftype == kMXFP4_MOE || falcon || cols % layout_of(base).block_size != 0) return QuantType::Q8_0;
        if (ftype == kIQ2_XXS || ftype == kIQ2_XS || ftype == kIQ3_XXS || ftype == kIQ2_S || ftype == kIQ2_M ||
            ftype == kIQ1_S || ftype == kIQ1_M) {
            return QuantType::Q5_K;
        }
        return base != QuantType::Q8_0 ? QuantType::Q6_K : base;
    }
    // NVFP4 files keep the embedding out of FP4, as ModelOpt does (a lookup
    // has no product to apply the second-level factor to): Q8_0 here.
    if (base == QuantType::NVFP4 && name == "token_embd.weight") return QuantType::Q8_0;
    if ((ftype == kQ2_0 || ftype == kTQ1_0 || ftype == kTQ2_0) && name == "token_embd.weight") return QuantType::Q4_K;
    if (!target.mix) return base;
    // gpt-oss's mix: the experts' stacked (3-D) tensors MXFP4, the rest Q8_0.
    if (ftype == kMXFP4_MOE) return stacked > 1 ? QuantType::MXFP4 : QuantType::Q8_0;
    const bool iq1_mix = ftype == kIQ1_S || ftype == kIQ1_M;
    const bool iq2_mix = iq1_mix || ftype == kIQ2_XXS || ftype == kIQ2_XS || ftype == kIQ2_S || ftype == kIQ2_M;
    const bool iq2_s_mix = ftype == kIQ2_S || ftype == kIQ2_M;
    if (name == "token_embd.weight") {
        if (iq1_mix || ftype == kIQ2_XXS || ftype == kIQ2_XS) return QuantType::Q2_K;
        if (iq2_s_mix || ftype == kIQ3_XXS) return QuantType::IQ3_S;
        return base;
    }
    const int n_layer = model.n_layer;
    const int layer = std::max(0, layer_of(name));
    QuantType type = base;
    if (iq2_mix) {
        // The 1- and 2-bit I-quant mixes have rules of their own for these four.
        if (contains(name, "attn_v.weight")) {
            if (model.n_gqa() >= 4 || model.n_expert >= 4) return QuantType::Q4_K;
            return iq2_s_mix ? QuantType::IQ3_S : QuantType::Q2_K;
        }
        if (model.n_expert == 8 && contains(name, "attn_k.weight")) return QuantType::Q4_K;
        if (contains(name, "ffn_down")) {
            if (layer < n_layer / 8) return iq2_s_mix ? QuantType::IQ3_S : QuantType::Q2_K;
            return base;
        }
        if (contains(name, "attn_output.weight")) {
            if (model.n_expert == 8) return QuantType::Q5_K;
            return iq1_mix ? QuantType::IQ2_XXS : iq2_s_mix ? QuantType::IQ3_S : base;
        }
        return base;
    }
    if (contains(name, "attn_qkv.weight")) {
        if (ftype == kQ3_K_M || ftype == kQ3_K_L || ftype == kIQ3_M) type = QuantType::Q4_K;
        else if (ftype == kQ4_K_M) type = QuantType::Q5_K;
        else if (ftype == kQ5_K_M) type = QuantType::Q6_K;
    } else if (contains(name, "attn_v.weight")) {
        const int gqa = model.n_gqa();
        if (ftype == kQ2_K) type = gqa >= 4 ? QuantType::Q4_K : QuantType::Q3_K;
        else if (ftype == kQ2_K_S && gqa >= 4) type = QuantType::Q4_K;
        else if (ftype == kIQ3_XXS) type = gqa >= 4 ? QuantType::Q4_K : !has_imatrix ? QuantType::IQ3_S : QuantType::IQ3_XXS;
        else if ((ftype == kIQ3_XS || ftype == kIQ3_S) && gqa >= 4) type = QuantType::Q4_K;
        else if (ftype == kIQ3_M) type = QuantType::Q4_K;
        else if (ftype == kQ3_K_M) type = i_attn_v < 2 ? QuantType::Q5_K : QuantType::Q4_K;
        else if (ftype == kQ3_K_L) type = QuantType::Q5_K;
        else if ((ftype == kIQ4_NL || ftype == kIQ4_XS) && gqa >= 4) type = QuantType::Q5_K;
        else if ((ftype == kQ4_K_M || ftype == kQ5_K_M) && use_more_bits(i_attn_v, model.n_attn_v)) type = QuantType::Q6_K;
        else if (ftype == kQ4_K_S && i_attn_v < 4) type = QuantType::Q5_K;
        // A 70B llama's attn_v is 8x smaller than attn_q: more bits cost little.
        if (model.arch == "llama" && n_layer == 80 && (type == QuantType::Q3_K || type == QuantType::Q4_K)) type = QuantType::Q5_K;
        if (model.n_expert == 8) type = QuantType::Q8_0;
    } else if (contains(name, "attn_k.weight")) {
        if (model.n_expert == 8) type = QuantType::Q8_0;
        else if (ftype == kIQ3_XS) type = QuantType::IQ3_XXS;
        else if (ftype == kIQ3_XXS) type = QuantType::IQ2_S;
    } else if (contains(name, "attn_q.weight")) {
        if (ftype == kIQ3_XS) type = QuantType::IQ3_XXS;
        else if (ftype == kIQ3_XXS) type = QuantType::IQ2_S;
    } else if (contains(name, "attn_output.weight")) {
        if (!falcon) {
            if (model.n_expert == 8) {
                if (ftype == kQ2_K || ftype == kIQ3_XS || ftype == kIQ3_XXS || ftype == kQ3_K_S || ftype == kQ3_K_M ||
                    ftype == kIQ4_NL || ftype == kQ4_K_S || ftype == kQ4_K_M || ftype == kIQ3_S || ftype == kIQ3_M ||
                    ftype == kIQ4_XS) {
                    type = QuantType::Q5_K;
                }
            } else if (ftype == kQ2_K) {
                type = QuantType::Q3_K;
            } else if (ftype == kIQ3_XXS) {
                type = QuantType::IQ3_S;
            } else if (ftype == kQ3_K_M || ftype == kIQ3_M) {
                type = QuantType::Q4_K;
            } else if (ftype == kQ3_K_L) {
                type = QuantType::Q5_K;
            }
        } else if (ftype == kQ3_K_L) {
            type = QuantType::Q4_K;
        }
    } else if (contains(name, "ffn_up") || contains(name, "ffn_gate")) {
        if (ftype == kIQ3_XS && layer >= n_layer / 8 && layer < 7 * n_layer / 8) type = QuantType::IQ3_XXS;
    } else if (contains(name, "ffn_down")) {
        if (ftype == kQ2_K) {
            type = QuantType::Q3_K;
        } else if (ftype == kQ2_K_S) {
            if (layer < n_layer / 8) type = QuantType::Q4_K;
        } else if (ftype == kIQ3_XXS && !has_imatrix) {
            type = layer < n_layer / 8 ? QuantType::Q4_K : QuantType::Q3_K;
        } else if (ftype == kQ3_K_M) {
            type = layer < n_layer / 16                             ? QuantType::Q5_K
                   : !falcon || use_more_bits(layer, n_layer)       ? QuantType::Q4_K
                                                                    : QuantType::Q3_K;
        } else if (ftype == kIQ3_M && (layer < n_layer / 8 || (model.n_expert == 8 && use_more_bits(layer, n_layer)))) {
            type = QuantType::Q4_K;
        } else if (ftype == kQ3_K_L) {
            type = falcon ? QuantType::Q4_K : QuantType::Q5_K;
        } else if (ftype == kQ4_K_M) {
            if (falcon) {
                type = layer < n_layer / 16 ? QuantType::Q6_K : use_more_bits(layer, n_layer) ? QuantType::Q5_K : QuantType::Q4_K;
            } else if (use_more_bits(layer, n_layer)) {
                type = QuantType::Q6_K;
            }
        } else if (layer < n_layer / 8 && (ftype == kIQ4_NL || ftype == kIQ4_XS) && !has_imatrix) {
            type = QuantType::Q5_K;
        } else if (ftype == kQ5_K_M && use_more_bits(layer, n_layer)) {
            type = QuantType::Q6_K;
        } else if (ftype == kQ4_K_S && !falcon && layer < n_layer / 8) {
            type = QuantType::Q5_K;
        } else if ((ftype == kQ4_0 || ftype == kQ5_0) && has_imatrix && layer < n_layer / 8) {
            // llama.cpp: even with an importance matrix the first ffn_down
            // layers can go wrong at Q4_0 / Q5_0; their min makes Q4_1 / Q5_1 safe.
            type = ftype == kQ4_0 ? QuantType::Q4_1 : QuantType::Q5_1;
        }
    }
    return type;
}

bool requires_importance(const QuantizeTarget& target, const std::string& name, QuantType type) {
    if (name == "token_embd.weight" || name == "output.weight") return false;
    switch (type) {
        case QuantType::IQ3_XXS:
        case QuantType::IQ2_XXS:
        case QuantType::IQ2_XS:
        case QuantType::IQ2_S:
        case QuantType::IQ1_M:
        case QuantType::IQ1_S: return true;
        case QuantType::Q2_K: return target.file_type == kQ2_K_S;
        default: return false;
    }
}

}  // namespace tessera
