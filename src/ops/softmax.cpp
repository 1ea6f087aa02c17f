#include "ops/softmax.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void softmax_scalar(float* x, int64_t n) {
    if (n <= 0) return;
    const float max = *std::max_element(x, x + n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace tessera
