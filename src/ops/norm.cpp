#include "ops/norm.h"

#include <cmath>

namespace tessera {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
    // Accumulate in double: the mean of squares over thousands of channels is
    // where float error would otherwise build up.
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

}  // namespace tessera
