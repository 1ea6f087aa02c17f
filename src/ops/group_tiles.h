// The loop every grouped kernel of a target shares (QuantTraits::vec_dot_groups,
// Q4_0/Q8_0 with 32-element blocks, Q4_K with 256-element super-blocks): each
// group of 16 rows, its columns in tiles of at most kMaxCols, each tile by the
// target's kernel for that many columns.
// Plain C++ over function pointers, so one definition serves every target.
#pragma once

#include "ops/int8_dot_extension.h"
#include "ops/row_groups.h"

#include <cstddef>
#include <cstdint>

namespace tessera {

// One grouped kernel: 16 rows x C columns over all blocks of a group, in units
// of unit_blocks; y[u * unit_stride + c * y_stride + r]. `sums` are the
// activations' Q8_0 block sums (Q4_K's kernels take Q8_K's own bsums instead).
using Int8GroupKernel = void (*)(int64_t n_blocks, int64_t unit_blocks, const uint8_t* group, const uint8_t* x,
                                 size_t x_stride, const int32_t* sums, size_t sums_stride, float* y,
                                 size_t y_stride, size_t unit_stride, bool accumulate);

// kernels[C - 1] computes C columns (C <= kMaxCols); kBlock elements a block.
template <int kMaxCols, int64_t kBlock = 32>
void run_int8_group_tiles(const Int8GroupKernel (&kernels)[kMaxCols], int64_t n, const void* w,
                          size_t group_stride, int n_groups, const void* x, size_t x_stride, const int32_t* x_sums,
                          size_t sums_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                          size_t unit_stride, bool accumulate) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t unit_blocks = (unit_n > 0 && unit_n < n ? unit_n : n) / kBlock;
    for (int g = 0; g < n_groups; ++g) {
        for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
            const int cc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
            kernels[cc - 1](n / kBlock, unit_blocks, wb + g * group_stride, xb + c0 * x_stride, x_stride,
                            x_sums + c0 * sums_stride, sums_stride, y + c0 * y_stride + g * kGroupRows, y_stride,
                            unit_stride, accumulate);
        }
    }
}

// A grouped product's entry point (QuantTraits::vec_dot_groups).
using VecDotGroupsFn = void (*)(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                                size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                                size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate);

// A target's entry point from its kernels for 1, 2, .. columns (in order):
// int8_group_entry<32, k<1>, k<2>, k<3>, k<4>>.
template <int64_t kBlock, Int8GroupKernel... kKernels>
void int8_group_entry(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                      const int32_t* x_sums, size_t sums_stride, int n_cols, float* y, size_t y_stride, int64_t unit_n,
                      size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[sizeof...(kKernels)] = {kKernels...};
    run_int8_group_tiles<static_cast<int>(sizeof...(kKernels)), kBlock>(kernels, n, w, group_stride, n_groups, x,
                                                                         x_stride, x_sums, sums_stride, n_cols, y,
                                                                         y_stride, unit_n, unit_stride, accumulate);
}

// The same for kernels against Q8_K activations, which carry their own
// block sums: no Q8_0 sums are read (the activation has none to point at).
template <Int8GroupKernel... kKernels>
void q8k_group_entry(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x, size_t x_stride,
                     const int32_t* /*x_sums*/, size_t /*sums_stride*/, int n_cols, float* y, size_t y_stride,
                     int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[sizeof...(kKernels)] = {kKernels...};
    static constexpr int32_t kNoSums = 0;
    run_int8_group_tiles<static_cast<int>(sizeof...(kKernels)), 256>(kernels, n, w, group_stride, n_groups, x, x_stride,
                                                                      &kNoSums, 0, n_cols, y, y_stride, unit_n,
                                                                      unit_stride, accumulate);
}

// kExtended where the CPU's int8 dot extension is enabled (AVX2 with
// AVX-VNNI, NEON with the dot product: ops/int8_dot_extension.h), kBase
// otherwise; checked on every product, so a test or --cpu-target can switch.
template <VecDotGroupsFn kExtended, VecDotGroupsFn kBase>
void with_int8_dot_extension(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                             size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                             size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    (int8_dot_extension_enabled() ? kExtended : kBase)(n, w, group_stride, n_groups, x, x_stride, x_sums, sums_stride,
                                                       n_cols, y, y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace tessera
