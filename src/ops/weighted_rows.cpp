#include "ops/weighted_rows.h"

#include "ops/quant_blocks.h"
#include "util/error.h"
#include "util/fp16.h"

#include <cstring>

#include <cmath>

namespace tessera {

namespace {
// Element i of a row of `type`, decoded one at a time: slow and plain, the
// reference the SIMD kernels are tested against.
float element(QuantType type, const uint8_t* row, int64_t i) {
    switch (type) {
        case QuantType::F32: {
            float v;
            std::memcpy(&v, row + 4 * i, 4);
            return v;
        }
        case QuantType::F16: {
            uint16_t h;
            std::memcpy(&h, row + 2 * i, 2);
            return fp16_to_fp32(h);
        }
        case QuantType::Q8_0: {
            BlockQ8_0 b;
            std::memcpy(&b, row + (i / kQ8_0Block) * sizeof(BlockQ8_0), sizeof b);
            return fp16_to_fp32(b.d) * static_cast<float>(b.qs[i % kQ8_0Block]);
        }
        case QuantType::Q4_0: {
            BlockQ4_0 b;
            std::memcpy(&b, row + (i / kQ4_0Block) * sizeof(BlockQ4_0), sizeof b);
            const int j = static_cast<int>(i % kQ4_0Block);
            const int q = j < kQ4_0Block / 2 ? (b.qs[j] & 15) : (b.qs[j - kQ4_0Block / 2] >> 4);
            return fp16_to_fp32(b.d) * static_cast<float>(q - 8);
        }
        default:
            throw make_error("internal: weighted row sums of {} rows", quant_type_name(type));
    }
}
}  // namespace

void weighted_row_sums_scalar(QuantType type, const void* rows, size_t row_stride, int64_t n_rows,
                              const float* weights, size_t w_stride, int n_sets, int64_t n, float* out,
                              size_t out_stride) {
    if (type != QuantType::F32 && type != QuantType::F16 && type != QuantType::Q8_0 && type != QuantType::Q4_0) {
        throw make_error("internal: weighted row sums of {} rows", quant_type_name(type));
    }
    for (int j = 0; j < n_sets; ++j) {
        float* o = out + static_cast<size_t>(j) * out_stride;
        for (int64_t i = 0; i < n; ++i) o[i] = 0.0f;
        for (int64_t r = 0; r < n_rows; ++r) {
            const float w = weights[static_cast<size_t>(j) * w_stride + static_cast<size_t>(r)];
            const auto* row = static_cast<const uint8_t*>(rows) + static_cast<size_t>(r) * row_stride;
            for (int64_t i = 0; i < n; ++i) {
                const float v = element(type, row, i);
                o[i] = std::fma(w, v, o[i]);
            }
        }
    }
}

}  // namespace tessera
