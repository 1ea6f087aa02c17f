#include "ops/quant_type.h"

#include "util/error.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace tessera {

namespace {

// Block layouts as llama.cpp defines them (ggml.c type_traits), so files people
// already have are sized correctly.
constexpr std::array<QuantLayout, 36> kLayouts{{
    {QuantType::F32, "F32", 1, 4},
    {QuantType::F16, "F16", 1, 2},
    {QuantType::Q4_0, "Q4_0", 32, 18},
    {QuantType::Q4_1, "Q4_1", 32, 20},
    {QuantType::Q5_0, "Q5_0", 32, 22},
    {QuantType::Q5_1, "Q5_1", 32, 24},
    {QuantType::Q8_0, "Q8_0", 32, 34},
    {QuantType::Q8_1, "Q8_1", 32, 36},
    {QuantType::Q2_K, "Q2_K", 256, 84},
    {QuantType::Q3_K, "Q3_K", 256, 110},
    {QuantType::Q4_K, "Q4_K", 256, 144},
    {QuantType::Q5_K, "Q5_K", 256, 176},
    {QuantType::Q6_K, "Q6_K", 256, 210},
    {QuantType::Q8_K, "Q8_K", 256, 292},
    {QuantType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {QuantType::IQ2_XS, "IQ2_XS", 256, 74},
    {QuantType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {QuantType::IQ1_S, "IQ1_S", 256, 50},
    {QuantType::IQ4_NL, "IQ4_NL", 32, 18},
    {QuantType::IQ3_S, "IQ3_S", 256, 110},
    {QuantType::IQ2_S, "IQ2_S", 256, 82},
    {QuantType::IQ4_XS, "IQ4_XS", 256, 136},
    {QuantType::I8, "I8", 1, 1},
    {QuantType::I16, "I16", 1, 2},
    {QuantType::I32, "I32", 1, 4},
    {QuantType::I64, "I64", 1, 8},
    {QuantType::F64, "F64", 1, 8},
    {QuantType::IQ1_M, "IQ1_M", 256, 56},
    {QuantType::BF16, "BF16", 1, 2},
    {QuantType::TQ1_0, "TQ1_0", 256, 54},
    {QuantType::TQ2_0, "TQ2_0", 256, 66},
    {QuantType::MXFP4, "MXFP4", 32, 17},
    {QuantType::NVFP4, "NVFP4", 64, 36},
    {QuantType::Q1_0, "Q1_0", 128, 18},
    {QuantType::Q2_0, "Q2_0", 64, 18},
    {QuantType::BF16_F32ACT, "BF16 (F32 activations)", 1, 2},
}};

}  // namespace

std::optional<QuantLayout> quant_layout(uint32_t type_id) {
    for (const auto& layout : kLayouts) {
        if (static_cast<uint32_t>(layout.type) == type_id && !is_internal_type(layout.type)) return layout;
    }
    return std::nullopt;
}

const QuantLayout& layout_of(QuantType type) {
    for (const auto& layout : kLayouts) {
        if (layout.type == type) return layout;
    }
    throw make_error("internal: no layout for type id {}", static_cast<uint32_t>(type));
}

const char* quant_type_name(QuantType type) { return layout_of(type).name; }

std::optional<QuantType> parse_quant_type(const std::string& name) {
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    for (const auto& layout : kLayouts) {
        if (upper == layout.name && !is_internal_type(layout.type)) return layout.type;
    }
    return std::nullopt;
}

}  // namespace tessera
