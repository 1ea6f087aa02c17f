// RMSNorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i].
#pragma once

#include <cstdint>

namespace tessera {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

}  // namespace tessera
