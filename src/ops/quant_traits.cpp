#include "ops/quant_traits.h"

#include "ops/dot_kernels.h"
#include "ops/iq_grids_hwy.h"
#include "ops/nvfp4_hwy.h"
#include "ops/q1_0_hwy.h"
#include "ops/ternary_hwy.h"
#include "ops/kquants_hwy.h"

#include "util/checked.h"
#include "util/error.h"

namespace tessera {

const QuantTraits* compute_traits(QuantType type) {
    // The best SIMD target of this CPU (chosen by Highway's dispatch; tests may
    // force another), falling back to the scalar references.
    if (const QuantTraits* simd = simd_block_traits(type)) return simd;
    if (const QuantTraits* simd = kquants_simd_traits(type)) return simd;
    if (const QuantTraits* simd = iq_grid_simd_traits(type)) return simd;
    if (const QuantTraits* simd = q1_0_simd_traits(type)) return simd;
    if (const QuantTraits* simd = ternary_simd_traits(type)) return simd;
    if (const QuantTraits* simd = nvfp4_simd_traits(type)) return simd;
    return scalar_traits(type);
}

const QuantTraits& require_compute_traits(QuantType type, const char* what) {
    const QuantTraits* traits = compute_traits(type);
    if (traits == nullptr) {
        throw make_error("{}: tensor type {} is not supported (supported: {})", what, quant_type_name(type),
                         supported_weight_types());
    }
    return *traits;
}

const QuantTraits& require_weight_traits(QuantType type, const char* what) {
    const QuantTraits& traits = require_compute_traits(type, what);
    if (traits.vec_dot == nullptr) {
        throw make_error("{}: tensor type {} holds activations only, not weights (supported: {})", what,
                         quant_type_name(type), supported_weight_types());
    }
    return traits;
}

std::string supported_weight_types() {
    std::string names;
    for (uint32_t id = 0; id < 64; ++id) {
        const auto layout = quant_layout(id);
        if (!layout) continue;
        const QuantTraits* traits = scalar_traits(layout->type);
        if (traits == nullptr || traits->vec_dot == nullptr) continue;
        names += names.empty() ? "" : ", ";
        names += layout->name;
    }
    return names;
}

uint64_t quant_row_bytes(QuantType type, int64_t n) {
    const QuantLayout& layout = layout_of(type);
    if (n < 0 || n % layout.block_size != 0) {
        throw make_error("{} elements is not a whole number of {} blocks of {}", n, layout.name, layout.block_size);
    }
    return checked_mul(static_cast<uint64_t>(n / layout.block_size), layout.block_bytes, "row bytes");
}

}  // namespace tessera
