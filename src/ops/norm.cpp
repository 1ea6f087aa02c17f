#include "ops/norm.h"

#include <cmath>

namespace tessera {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
    // Accumulate in double: the mean of squares over thousands of channels is
    // where float error would otherwise build up. Eight partial sums in a
    // fixed order, not one: a single chain of dependent additions took ~3 us
    // per norm of 2048 channels, serial time between a token's products, and
    // a fixed order gives the same bits whether or not the compiler puts the
    // partial sums in vector lanes.
    constexpr int64_t kParts = 8;
    double part[kParts] = {};
    int64_t i = 0;
    for (; i + kParts <= n; i += kParts) {
        for (int64_t k = 0; k < kParts; ++k) part[k] += static_cast<double>(x[i + k] * x[i + k]);
    }
    for (int64_t k = 0; i < n; ++i, ++k) part[k] += static_cast<double>(x[i] * x[i]);
    double sum = 0.0;
    for (const double p : part) sum += p;
    // The scale in float arithmetic, as ggml computes it (float squares
    // summed in double, then a float mean and a float square root), so that
    // the normed rows match llama.cpp's to the bit far more often: with Q8_0
    // activations a one-ulp difference in a whole row can flip roundings.
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

}  // namespace tessera
