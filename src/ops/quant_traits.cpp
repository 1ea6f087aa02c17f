#include "ops/quant_traits.h"

#include "ops/dot_kernels.h"
#include "ops/kquants_hwy.h"

#include "util/checked.h"
#include "util/error.h"

namespace tessera {

const QuantTraits* compute_traits(QuantType type) {
    // The best SIMD target of this CPU (chosen by Highway's dispatch; tests may
    // force another), falling back to the scalar references.
    if (const QuantTraits* simd = simd_block_traits(type)) return simd;
    if (const QuantTraits* simd = kquants_simd_traits(type)) return simd;
    return scalar_traits(type);
}

const QuantTraits& require_compute_traits(QuantType type, const char* what) {
    const QuantTraits* traits = compute_traits(type);
    if (traits == nullptr) {
        throw make_error("{}: tensor type {} is not supported (supported: F32, F16, Q8_0, Q4_0, Q4_K, Q6_K)", what,
                         quant_type_name(type));
    }
    return *traits;
}

const QuantTraits& require_weight_traits(QuantType type, const char* what) {
    const QuantTraits& traits = require_compute_traits(type, what);
    if (traits.vec_dot == nullptr) {
        throw make_error("{}: tensor type {} holds activations only, not weights (supported: F32, F16, Q8_0, Q4_0, "
                         "Q4_K, Q6_K)",
                         what, quant_type_name(type));
    }
    return traits;
}

uint64_t quant_row_bytes(QuantType type, int64_t n) {
    const QuantLayout& layout = layout_of(type);
    if (n < 0 || n % layout.block_size != 0) {
        throw make_error("{} elements is not a whole number of {} blocks of {}", n, layout.name, layout.block_size);
    }
    return checked_mul(static_cast<uint64_t>(n / layout.block_size), layout.block_bytes, "row bytes");
}

}  // namespace tessera
