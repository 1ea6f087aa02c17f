#include "ops/float_canonical.h"

#include "util/fp16.h"

#include <cmath>
#include <cstring>

namespace tessera {

float lanes16_tree(float* lanes) {
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) lanes[j] += lanes[j + s];
    }
    return lanes[0];
}

namespace {

// The padding up to a multiple of 16: fma(0, 0, lane), which turns a lane of
// -0 into +0 as the SIMD code's zero-padded last vector does.
void pad(int64_t n, float* lanes) {
    for (int64_t i = n; i % 16 != 0; ++i) lanes[i % 16] = std::fma(0.0f, 0.0f, lanes[i % 16]);
}

}  // namespace

float f32_dot_canonical(int64_t n, const float* w, const float* x) {
    float lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(w[i], x[i], lanes[i % 16]);
    pad(n, lanes);
    return lanes16_tree(lanes);
}

float f16_dot_canonical(int64_t n, const void* w, const float* x) {
    float lanes[16] = {};
    const auto* bytes = static_cast<const uint8_t*>(w);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        lanes[i % 16] = std::fma(fp16_to_fp32(h), x[i], lanes[i % 16]);
    }
    pad(n, lanes);
    return lanes16_tree(lanes);
}

float sum_canonical(const float* x, int64_t n) {
    float lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] += x[i];
    return lanes16_tree(lanes);
}

}  // namespace tessera
