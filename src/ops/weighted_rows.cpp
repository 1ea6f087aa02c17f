#include "ops/weighted_rows.h"

#include "util/error.h"
#include "util/fp16.h"

#include <cstring>

namespace tessera {

void weighted_row_sums_scalar(QuantType type, const void* rows, size_t row_stride, int64_t n_rows,
                              const float* weights, size_t w_stride, int n_sets, int64_t n, float* out,
                              size_t out_stride) {
    if (type != QuantType::F32 && type != QuantType::F16) {
        throw make_error("internal: weighted row sums of {} rows", quant_type_name(type));
    }
    for (int j = 0; j < n_sets; ++j) {
        float* o = out + static_cast<size_t>(j) * out_stride;
        for (int64_t i = 0; i < n; ++i) o[i] = 0.0f;
        for (int64_t r = 0; r < n_rows; ++r) {
            const float w = weights[static_cast<size_t>(j) * w_stride + static_cast<size_t>(r)];
            const auto* row = static_cast<const uint8_t*>(rows) + static_cast<size_t>(r) * row_stride;
            for (int64_t i = 0; i < n; ++i) {
                float v;
                if (type == QuantType::F32) {
                    std::memcpy(&v, row + 4 * i, 4);
                } else {
                    uint16_t h;
                    std::memcpy(&h, row + 2 * i, 2);
                    v = fp16_to_fp32(h);
                }
                o[i] += w * v;
            }
        }
    }
}

}  // namespace tessera
