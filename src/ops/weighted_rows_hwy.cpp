// SIMD weighted row sums (see weighted_rows.h), compiled once per CPU target
// by Highway's foreach_target, the best one chosen at run time. One vector of
// output elements at a time holds up to 8 sets' accumulators in registers
// while the rows stream past; each row's slice is loaded (and, F16, widened)
// once for all sets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/weighted_rows_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/weighted_rows.h"
#include "util/error.h"

#include <algorithm>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE
using DF = hn::ScalableTag<float>;

template <bool kHalf>
HWY_INLINE hn::Vec<DF> load_row(DF d, const uint8_t* row, int64_t i) {
    if constexpr (kHalf) {
        const hn::Rebind<hwy::float16_t, DF> dh;
        return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + i));
    } else {
        return hn::LoadU(d, reinterpret_cast<const float*>(row) + i);
    }
}

// Elements [i, i + lanes) of S sets.
template <bool kHalf, int S>
void sets_kernel(const uint8_t* rows, size_t row_stride, int64_t n_rows, const float* weights, size_t w_stride,
                 int64_t i, float* out, size_t out_stride) {
    const DF d;
    hn::Vec<DF> acc[S];
    for (int j = 0; j < S; ++j) acc[j] = hn::Zero(d);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto v = load_row<kHalf>(d, rows + static_cast<size_t>(r) * row_stride, i);
        for (int j = 0; j < S; ++j) acc[j] = hn::MulAdd(hn::Set(d, weights[j * w_stride + r]), v, acc[j]);
    }
    for (int j = 0; j < S; ++j) hn::StoreU(acc[j], d, out + j * out_stride + i);
}

template <bool kHalf>
void sums(const uint8_t* rows, size_t row_stride, int64_t n_rows, const float* weights, size_t w_stride,
          int n_sets, int64_t n, float* out, size_t out_stride) {
    using Kernel = void (*)(const uint8_t*, size_t, int64_t, const float*, size_t, int64_t, float*, size_t);
    static constexpr Kernel kernels[8] = {sets_kernel<kHalf, 1>, sets_kernel<kHalf, 2>, sets_kernel<kHalf, 3>,
                                          sets_kernel<kHalf, 4>, sets_kernel<kHalf, 5>, sets_kernel<kHalf, 6>,
                                          sets_kernel<kHalf, 7>, sets_kernel<kHalf, 8>};
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
    const int64_t full = n - n % lanes;
    for (int j0 = 0; j0 < n_sets; j0 += 8) {
        const int sets = std::min(8, n_sets - j0);
        for (int64_t i = 0; i < full; i += lanes) {
            kernels[sets - 1](rows, row_stride, n_rows, weights + j0 * w_stride, w_stride, i, out + j0 * out_stride,
                              out_stride);
        }
    }
    if (full < n) {
        // The last elements: the reference over a row suffix.
        const size_t elem = kHalf ? 2 : 4;
        weighted_row_sums_scalar(kHalf ? QuantType::F16 : QuantType::F32, rows + full * elem, row_stride, n_rows,
                                 weights, w_stride, n_sets, n - full, out + full, out_stride);
    }
}
#endif  // !HWY_HAVE_SCALABLE

void WeightedRowSums(QuantType type, const void* rows, size_t row_stride, int64_t n_rows, const float* weights,
                     size_t w_stride, int n_sets, int64_t n, float* out, size_t out_stride) {
#if HWY_HAVE_SCALABLE
    // Scalable vectors cannot be held in arrays: the reference.
    weighted_row_sums_scalar(type, rows, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
#else
    const auto* bytes = static_cast<const uint8_t*>(rows);
    if (type == QuantType::F32) {
        sums<false>(bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
    } else if (type == QuantType::F16) {
        sums<true>(bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
    } else {
        throw make_error("internal: weighted row sums of {} rows", quant_type_name(type));
    }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(WeightedRowSums);

void weighted_row_sums(QuantType type, const void* rows, size_t row_stride, int64_t n_rows, const float* weights,
                       size_t w_stride, int n_sets, int64_t n, float* out, size_t out_stride) {
    HWY_DYNAMIC_DISPATCH(WeightedRowSums)(type, rows, row_stride, n_rows, weights, w_stride, n_sets, n, out,
                                          out_stride);
}
}  // namespace tessera
#endif
