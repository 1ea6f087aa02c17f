// Scalar reference of Q1_0 (q1_0_scalar.h).
#include "ops/q1_0_scalar.h"

#include "ops/block_io.h"
#include "util/fp16.h"

#include <cmath>

namespace tessera {

void q1_0_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ1_0Block; ++b) {
        const auto block = load_block<BlockQ1_0>(src, b);
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < kQ1_0Block; ++i) dst[b * kQ1_0Block + i] = (block.qs[i / 8] >> (i % 8)) & 1 ? d : -d;
    }
}

void q1_0_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQ1_0Block; ++b) {
        const float* x = src + b * kQ1_0Block;
        // The scale is the block's mean magnitude (summed in order, as
        // llama.cpp does); each weight keeps only its sign, 0 counting as +.
        float sum_abs = 0.0f;
        for (int i = 0; i < kQ1_0Block; ++i) sum_abs += std::fabs(x[i]);
        BlockQ1_0 block{};
        block.d = fp32_to_fp16(sum_abs / kQ1_0Block);
        for (int i = 0; i < kQ1_0Block; ++i) {
            if (x[i] >= 0.0f) block.qs[i / 8] = static_cast<uint8_t>(block.qs[i / 8] | (1u << (i % 8)));
        }
        store_block(dst, b, block);
    }
}

float q1_0_block_step(const BlockQ1_0& w, const Q8_0x4& x, float acc) {
    const float d = fp16_to_fp32(w.d);
    for (int k = 0; k < 4; ++k) {
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) {
            const int e = 32 * k + i;
            s += (w.qs[e / 8] >> (e % 8)) & 1 ? int32_t{x.b[k].qs[i]} : -int32_t{x.b[k].qs[i]};
        }
        acc = std::fma(static_cast<float>(s), d * fp16_to_fp32(x.b[k].d), acc);
    }
    return acc;
}

float q1_0_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockQ1_0, Q8_0x4, q1_0_block_step>(n, kQ1_0Block, w, x);
}

}  // namespace tessera
