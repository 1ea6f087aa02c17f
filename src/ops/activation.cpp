#include "ops/activation.h"

#include <cmath>

namespace tessera {

void swiglu_scalar(float* gate, const float* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

}  // namespace tessera
