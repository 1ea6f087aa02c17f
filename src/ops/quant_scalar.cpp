// Scalar reference kernels for F32, F16, Q8_0 and Q4_0. Rounding follows
// llama.cpp's reference quantizers so a tensor quantized here has the same
// bytes as one quantized by llama.cpp.
#include "ops/quant_blocks.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

void f32_to_float(const void* src, float* dst, int64_t n) {
    std::copy_n(static_cast<const float*>(src), n, dst);
}
void f32_from_float(const float* src, void* dst, int64_t n) {
    std::copy_n(src, n, static_cast<float*>(dst));
}
float f32_vec_dot(int64_t n, const void* w, const void* x) {
    const float* a = static_cast<const float*>(w);
    const float* b = static_cast<const float*>(x);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void f16_to_float(const void* src, float* dst, int64_t n) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}
void f16_from_float(const float* src, void* dst, int64_t n) {
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}
float f16_vec_dot(int64_t n, const void* w, const void* x) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(a[i]) * b[i];
    return sum;
}

void q8_0_to_float(const void* src, float* dst, int64_t n) {
    const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(src);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (int i = 0; i < kQ8_0Block; ++i) dst[b * kQ8_0Block + i] = d * blocks[b].qs[i];
    }
}
void q8_0_from_float(const float* src, void* dst, int64_t n) {
    BlockQ8_0* blocks = static_cast<BlockQ8_0*>(dst);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float* x = src + b * kQ8_0Block;
        float amax = 0.0f;
        for (int i = 0; i < kQ8_0Block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (int i = 0; i < kQ8_0Block; ++i) blocks[b].qs[i] = static_cast<int8_t>(std::round(x[i] * id));
    }
}
float q8_0_vec_dot(int64_t n, const void* w, const void* x) {
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ8_0Block; ++k) {
        int32_t isum = 0;
        for (int i = 0; i < kQ8_0Block; ++i) isum += int32_t{a[k].qs[i]} * int32_t{b[k].qs[i]};
        sum += static_cast<float>(isum) * (fp16_to_fp32(a[k].d) * fp16_to_fp32(b[k].d));
    }
    return sum;
}

void q4_0_to_float(const void* src, float* dst, int64_t n) {
    const BlockQ4_0* blocks = static_cast<const BlockQ4_0*>(src);
    constexpr int half = kQ4_0Block / 2;
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (int i = 0; i < half; ++i) {
            dst[b * kQ4_0Block + i] = d * static_cast<float>((blocks[b].qs[i] & 0x0f) - 8);
            dst[b * kQ4_0Block + i + half] = d * static_cast<float>((blocks[b].qs[i] >> 4) - 8);
        }
    }
}
void q4_0_from_float(const float* src, void* dst, int64_t n) {
    BlockQ4_0* blocks = static_cast<BlockQ4_0*>(dst);
    constexpr int half = kQ4_0Block / 2;
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const float* x = src + b * kQ4_0Block;
        // The scale maps the element of largest magnitude, with its sign, to -8,
        // which uses the full asymmetric range [-8, 7].
        float amax = 0.0f;
        float max = 0.0f;
        for (int i = 0; i < kQ4_0Block; ++i) {
            if (std::fabs(x[i]) > amax) {
                amax = std::fabs(x[i]);
                max = x[i];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (int i = 0; i < half; ++i) {
            const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(x[i] * id + 8.5f)));
            const auto hi = static_cast<uint8_t>(std::min(15, static_cast<int>(x[i + half] * id + 8.5f)));
            blocks[b].qs[i] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}
float q4_0_vec_dot(int64_t n, const void* w, const void* x) {
    const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
    constexpr int half = kQ4_0Block / 2;
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ4_0Block; ++k) {
        int32_t isum = 0;
        for (int i = 0; i < half; ++i) {
            isum += ((a[k].qs[i] & 0x0f) - 8) * int32_t{b[k].qs[i]};
            isum += ((a[k].qs[i] >> 4) - 8) * int32_t{b[k].qs[i + half]};
        }
        sum += static_cast<float>(isum) * (fp16_to_fp32(a[k].d) * fp16_to_fp32(b[k].d));
    }
    return sum;
}

constexpr QuantTraits kScalarTraits[] = {
    {QuantType::F32, QuantType::F32, f32_to_float, f32_from_float, f32_vec_dot},
    {QuantType::F16, QuantType::F32, f16_to_float, f16_from_float, f16_vec_dot},
    {QuantType::Q8_0, QuantType::Q8_0, q8_0_to_float, q8_0_from_float, q8_0_vec_dot},
    {QuantType::Q4_0, QuantType::Q8_0, q4_0_to_float, q4_0_from_float, q4_0_vec_dot},
};

}  // namespace

const QuantTraits* scalar_traits(QuantType type) {
    for (const auto& traits : kScalarTraits) {
        if (traits.type == type) return &traits;
    }
    return nullptr;
}

}  // namespace tessera
