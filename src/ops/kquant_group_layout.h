// What every target's grouped Q4_K kernel shares: the offsets of a group's
// super-block (ops/row_groups.h) and of a Q8_K block, and the loop over a
// product's groups and tiles of columns. Plain C++ over function pointers, so
// one definition serves every target.
#pragma once

#include "ops/row_groups.h"

#include <cstddef>
#include <cstdint>

namespace tessera::q4k_group {

// A group's super-block: fp16 d, fp16 dmin, unpacked scales and mins, codes.
inline constexpr int64_t kBlockBytes = 2368, kDmin = 32, kScales = 64, kMins = 192, kQs = 320;
// A Q8_K block: float d, int8 qs[256], int16 bsums[16].
inline constexpr int64_t kQ8KBytes = 292, kQ8KQs = 4, kQ8KBsums = 260;

// 16 rows x C columns over all nb super-blocks of one group, in units of
// unit_nb super-blocks; y[u * unit_stride + c * y_stride + r].
using Kernel = void (*)(int64_t nb, int64_t unit_nb, const uint8_t* group, const uint8_t* x, size_t x_stride,
                        float* y, size_t y_stride, size_t unit_stride, bool accumulate);

// kernels[C - 1] computes C columns (C <= kMaxCols).
template <int kMaxCols>
void run_tiles(const Kernel (&kernels)[kMaxCols], int64_t n, const void* w, size_t group_stride, int n_groups,
               const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
               size_t unit_stride, bool accumulate) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t unit_blocks = (unit_n > 0 && unit_n < n ? unit_n : n) / 256;
    for (int g = 0; g < n_groups; ++g) {
        for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
            const int cc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
            kernels[cc - 1](n / 256, unit_blocks, wb + g * group_stride, xb + c0 * x_stride, x_stride,
                            y + c0 * y_stride + g * kGroupRows, y_stride, unit_stride, accumulate);
        }
    }
}

}  // namespace tessera::q4k_group
