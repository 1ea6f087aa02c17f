// The importance-matrix quantizer of each type (quant_importance.h).
#include "ops/quant_importance.h"

#include "ops/block32_scalar.h"
#include "ops/iq4_scalar.h"
#include "ops/iq_grid_scalar.h"
#include "ops/kquant_scalar.h"
#include "ops/quant_traits.h"
#include "util/error.h"

namespace tessera {

void quantize_row_with_importance(QuantType type, const float* src, void* dst, int64_t n, const float* importance) {
    using Weighted = void (*)(const float*, void*, int64_t, const float*);
    Weighted weighted = nullptr;
    switch (type) {
        case QuantType::Q4_0: weighted = q4_0_quantize; break;
        case QuantType::Q4_1: weighted = q4_1_quantize; break;
        case QuantType::Q5_0: weighted = q5_0_quantize; break;
        case QuantType::Q5_1: weighted = q5_1_quantize; break;
        case QuantType::Q2_K: weighted = q2_k_quantize; break;
        case QuantType::Q3_K: weighted = q3_k_quantize; break;
        case QuantType::Q4_K: weighted = q4_k_quantize; break;
        case QuantType::Q5_K: weighted = q5_k_quantize; break;
        case QuantType::Q6_K: weighted = q6_k_quantize; break;
        case QuantType::IQ4_NL: weighted = iq4_nl_quantize; break;
        case QuantType::IQ4_XS: weighted = iq4_xs_quantize; break;
        case QuantType::IQ2_XXS: weighted = iq2_xxs_quantize; break;
        case QuantType::IQ2_XS: weighted = iq2_xs_quantize; break;
        case QuantType::IQ2_S: weighted = iq2_s_quantize; break;
        case QuantType::IQ3_XXS: weighted = iq3_xxs_quantize; break;
        case QuantType::IQ3_S: weighted = iq3_s_quantize; break;
        case QuantType::IQ1_S: weighted = iq1_s_quantize; break;
        case QuantType::IQ1_M: weighted = iq1_m_quantize; break;
        default: break;
    }
    if (weighted != nullptr && importance != nullptr) return weighted(src, dst, n, importance);
    const QuantTraits* traits = scalar_traits(type);
    if (traits == nullptr || traits->from_float == nullptr) {
        throw make_error("cannot quantize to {}: no quantizer for the type", quant_type_name(type));
    }
    traits->from_float(src, dst, n);
}

}  // namespace tessera
