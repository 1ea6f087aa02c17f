// Scalar reference of Q2_0 (q2_0_scalar.h).
#include "ops/q2_0_scalar.h"

#include "ops/block_io.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void q2_0_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ2_0Block; ++b) {
        const auto block = load_block<BlockQ2_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQ2_0Block; ++i) dst[b * kQ2_0Block + i] = static_cast<float>(q2_0_code(block.qs, i) - 1) * d;
    }
}

void q2_0_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ2_0Block; ++b) {
        const float* x = src + b * kQ2_0Block;
        // The scale is the largest magnitude, unrounded for the division (as
        // llama.cpp does); codes round half away from zero, clamped to -1..2.
        float amax = 0.0f;
        for (int i = 0; i < kQ2_0Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        BlockQ2_0 block{};
        block.d = fp32_to_fp16(amax);
        for (int i = 0; i < kQ2_0Block; ++i) {
            const int q = std::clamp(static_cast<int>(std::round(x[i] * id)) + 1, 0, 3);
            block.qs[i / 4] = static_cast<uint8_t>(block.qs[i / 4] | (q << (2 * (i % 4))));
        }
        store_block(dst, b, block);
    }
}

float q2_0_block_step(const BlockQ2_0& w, const Q8_0x2& x, float acc) {
    const float d = fp16_to_fp32(w.d);
    for (int h = 0; h < 2; ++h) {
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += (q2_0_code(w.qs, 32 * h + i) - 1) * int32_t{x.b[h].qs[i]};
        acc = std::fma(static_cast<float>(s), d * fp16_to_fp32(x.b[h].d), acc);
    }
    return acc;
}

float q2_0_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ2_0, Q8_0x2, q2_0_block_step>(n, kQ2_0Block, w, x);
}

}  // namespace tessera
