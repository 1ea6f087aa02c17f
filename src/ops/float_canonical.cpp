#include "ops/float_canonical.h"

#include "util/fp16.h"

#include <cmath>
#include <cstring>
#include <limits>

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

float bf16_pairs_step(float a, float b, float lane) {
    const auto flush = [](float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v; };
    return flush(std::fma(flush(a), flush(b), lane));
}

float bf16_pairs_dot_canonical(int64_t n, const void* w, const void* x) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    // Element i of a row as a float, 0 past its end (the padding).
    const auto at = [n](const uint8_t* row, int64_t i) {
        if (i >= n) return 0.0f;
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        return bf16_to_fp32(h);
    };
    float lanes[16] = {};
    for (int64_t c = 0; c < n; c += 32) {
        for (int j = 0; j < 16; ++j) {
            const int64_t even = c + 2 * j;
            lanes[j] = bf16_pairs_step(at(wb, even + 1), at(xb, even + 1), lanes[j]);
            lanes[j] = bf16_pairs_step(at(wb, even), at(xb, even), lanes[j]);
        }
    }
    return lanes16_tree(lanes);
}

float sum_canonical(const float* x, int64_t n) {
    float lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] += x[i];
    return lanes16_tree(lanes);
}

}  // namespace tessera
