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
    kIQ4_NL = 25,
    kIQ4_XS = 30,
    kBF16 = 32,
    kMXFP4_MOE = 38,
};

const std::array<QuantizeTarget, 23> kTargets{{
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
    {"Q4_0", QuantType::Q4_0, kQ4_0},
    {"IQ4_NL", QuantType::IQ4_NL, kIQ4_NL},
    {"IQ4_XS", QuantType::IQ4_XS, kIQ4_XS},
    {"Q3_K_L", QuantType::Q3_K, kQ3_K_L},
    {"Q3_K_M", QuantType::Q3_K, kQ3_K_M},
    {"Q3_K_S", QuantType::Q3_K, kQ3_K_S},
    {"Q2_K", QuantType::Q2_K, kQ2_K},
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

bool is_block_quantized(QuantType type) { return layout_of(type).block_size > 1; }

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

QuantType mixed_type(const QuantizeTarget& target, const std::string& name, int64_t cols, int i_attn_v,
                     const MixModel& model) {
    const QuantType base = target.type;
    if (!is_block_quantized(base)) return base;  // F32, F16, BF16: no mix
    const uint32_t ftype = target.file_type;
    const bool falcon = model.arch == "falcon";
    // The output projection (or the tied embedding in its place) stays at
    // Q6_K: the logits are the model's most sensitive product.
    if (name == "output.weight" || (!model.has_output && name == "token_embd.weight")) {
        if (ftype == kMXFP4_MOE || falcon || cols % layout_of(base).block_size != 0) return QuantType::Q8_0;
        return base != QuantType::Q8_0 ? QuantType::Q6_K : base;
    }
    if (!target.mix) return base;
    if (ftype == kMXFP4_MOE) return QuantType::Q8_0;  // (its experts, 3-D tensors, are MXFP4)
    const int n_layer = model.n_layer;
    const int layer = std::max(0, layer_of(name));
    QuantType type = base;
    if (contains(name, "attn_qkv.weight")) {
        if (ftype == kQ3_K_M || ftype == kQ3_K_L) type = QuantType::Q4_K;
        else if (ftype == kQ4_K_M) type = QuantType::Q5_K;
        else if (ftype == kQ5_K_M) type = QuantType::Q6_K;
    } else if (contains(name, "attn_v.weight")) {
        const int gqa = model.n_gqa();
        if (ftype == kQ2_K) type = gqa >= 4 ? QuantType::Q4_K : QuantType::Q3_K;
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
    } else if (contains(name, "attn_output.weight")) {
        if (!falcon) {
            if (model.n_expert == 8) {
                if (ftype == kQ2_K || ftype == kQ3_K_S || ftype == kQ3_K_M || ftype == kIQ4_NL || ftype == kQ4_K_S ||
                    ftype == kQ4_K_M || ftype == kIQ4_XS) {
                    type = QuantType::Q5_K;
                }
            } else if (ftype == kQ2_K) {
                type = QuantType::Q3_K;
            } else if (ftype == kQ3_K_M) {
                type = QuantType::Q4_K;
            } else if (ftype == kQ3_K_L) {
                type = QuantType::Q5_K;
            }
        } else if (ftype == kQ3_K_L) {
            type = QuantType::Q4_K;
        }
    } else if (contains(name, "ffn_up") || contains(name, "ffn_gate")) {
        // (Only IQ3_XS's mix, which needs the grid types, changes these.)
    } else if (contains(name, "ffn_down")) {
        if (ftype == kQ2_K) {
            type = QuantType::Q3_K;
        } else if (ftype == kQ3_K_M) {
            type = layer < n_layer / 16                             ? QuantType::Q5_K
                   : !falcon || use_more_bits(layer, n_layer)       ? QuantType::Q4_K
                                                                    : QuantType::Q3_K;
        } else if (ftype == kQ3_K_L) {
            type = falcon ? QuantType::Q4_K : QuantType::Q5_K;
        } else if (ftype == kQ4_K_M) {
            if (falcon) {
                type = layer < n_layer / 16 ? QuantType::Q6_K : use_more_bits(layer, n_layer) ? QuantType::Q5_K : QuantType::Q4_K;
            } else if (use_more_bits(layer, n_layer)) {
                type = QuantType::Q6_K;
            }
        } else if (layer < n_layer / 8 && (ftype == kIQ4_NL || ftype == kIQ4_XS)) {
            type = QuantType::Q5_K;  // (llama.cpp: without an importance matrix)
        } else if (ftype == kQ5_K_M && use_more_bits(layer, n_layer)) {
            type = QuantType::Q6_K;
        } else if (ftype == kQ4_K_S && !falcon && layer < n_layer / 8) {
            type = QuantType::Q5_K;
        }
    }
    return type;
}

}  // namespace tessera
