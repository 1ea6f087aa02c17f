#include "ops/activation.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void swiglu_scalar(float* gate, const float* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void geglu_scalar(float* gate, const float* up, int64_t n) {
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), the constants ggml uses.
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    for (int64_t i = 0; i < n; ++i) {
        const float x = gate[i];
        gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x))) * up[i];
    }
}

void gated(FfnActivation activation, float* gate, const float* up, int64_t n) {
    switch (activation) {
        case FfnActivation::kGelu: geglu(gate, up, n); break;
        case FfnActivation::kSwigluOai: swiglu_oai(gate, up, n); break;
        case FfnActivation::kSilu: swiglu(gate, up, n); break;
    }
}

void swiglu_oai_scalar(float* gate, const float* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::min(gate[i], 7.0f);
        const float y = std::clamp(up[i], -7.0f, 7.0f);
        gate[i] = x / (1.0f + std::exp(-1.702f * x)) * (y + 1.0f);
    }
}

void soft_cap_scalar(float* x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace tessera
