// Scalar reference of NVFP4 (nvfp4_scalar.h).
#include "ops/nvfp4_scalar.h"

#include "ops/block_io.h"
#include "util/fp16.h"

#include <cmath>
#include <cstring>

namespace tessera {
namespace {

constexpr int kSub = 16;

// Element i (< 16) of sub-block s: low nibbles first, then high.
int nvfp4_code(const BlockNVFP4& block, int s, int i) {
    const uint8_t byte = block.qs[8 * s + (i & 7)];
    return i < 8 ? byte & 0xF : byte >> 4;
}

// The nearest grid value times d, the first of equals (llama.cpp's best_index_mxfp4).
uint8_t nearest_fp4(float x, float d) {
    int best = 0;
    float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
    for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(static_cast<float>(kMxfp4Values[k]) * d - x);
        if (err < best_err) {
            best = k;
            best_err = err;
        }
    }
    return static_cast<uint8_t>(best);
}

}  // namespace

uint8_t ue4m3_from_float(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    const int fp32_exp = static_cast<int>((bits >> 23) & 0xFF) - 127;
    const int fp32_man = static_cast<int>((bits >> 20) & 0x7);
    int exp = fp32_exp + 7;
    if (exp <= 0) {
        // Subnormal: value = man * 2^-9.
        int man = static_cast<int>(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        return man < 1 ? 0 : static_cast<uint8_t>(man);
    }
    if (exp >= 15) return 0x7E;
    int man = fp32_man + static_cast<int>((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        if (++exp >= 15) return 0x7E;
    }
    return static_cast<uint8_t>((exp << 3) | man);
}

void nvfp4_to_float(const void* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kNvfp4Block; ++b) {
        const auto block = load_block<BlockNVFP4>(src, b);
        for (int s = 0; s < 4; ++s) {
            const float d = ue4m3_half_to_float(block.d[s]);
            for (int i = 0; i < kSub; ++i) {
                dst[b * kNvfp4Block + kSub * s + i] = static_cast<float>(kMxfp4Values[nvfp4_code(block, s, i)]) * d;
            }
        }
    }
}

void nvfp4_from_float(const float* src, void* dst, int64_t n) {
    for (int64_t b = 0; b < n / kNvfp4Block; ++b) {
        BlockNVFP4 block{};
        for (int s = 0; s < 4; ++s) {
            const float* x = src + b * kNvfp4Block + kSub * s;
            float amax = 0.0f;
            for (int i = 0; i < kSub; ++i) {
                if (amax < std::fabs(x[i])) amax = std::fabs(x[i]);
            }
            // The scale maps E2M1's largest magnitude (6) onto the sub-block's.
            block.d[s] = ue4m3_from_float(amax / 6.0f);
            const float d = ue4m3_half_to_float(block.d[s]);
            for (int j = 0; j < kSub / 2; ++j) {
                block.qs[8 * s + j] = static_cast<uint8_t>(nearest_fp4(x[j], d) | (nearest_fp4(x[8 + j], d) << 4));
            }
        }
        store_block(dst, b, block);
    }
}

float nvfp4_block_step(const BlockNVFP4& w, const Q8_0x2& x, float acc) {
    for (int h = 0; h < 2; ++h) {
        int32_t s[2] = {0, 0};
        for (int half = 0; half < 2; ++half) {
            for (int i = 0; i < kSub; ++i) {
                s[half] += int32_t{kMxfp4Values[nvfp4_code(w, 2 * h + half, i)]} * int32_t{x.b[h].qs[kSub * half + i]};
            }
        }
        float t = ue4m3_half_to_float(w.d[2 * h]) * static_cast<float>(s[0]);
        t = std::fma(ue4m3_half_to_float(w.d[2 * h + 1]), static_cast<float>(s[1]), t);
        acc = std::fma(fp16_to_fp32(x.b[h].d), t, acc);
    }
    return acc;
}

float nvfp4_vec_dot(int64_t n, const void* w, const void* x) {
    return dot_by_block_steps<BlockNVFP4, Q8_0x2, nvfp4_block_step>(n, kNvfp4Block, w, x);
}

}  // namespace tessera
