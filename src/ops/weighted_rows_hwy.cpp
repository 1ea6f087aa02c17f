// SIMD weighted row sums (see weighted_rows.h), compiled once per CPU target
// by Highway's foreach_target, the best one chosen at run time. One vector of
// output elements at a time holds up to 8 sets' accumulators in registers
// while the rows stream past; each row's slice is loaded (and, F16, widened;
// Q8_0 and Q4_0, decoded and scaled by its block's d) once for all sets.
// Each element is a chain of fused multiply-adds over the rows in order, on
// every target and in the scalar reference: the same bits on every CPU.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/weighted_rows_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/canonical_math-inl.h"
#include "ops/quant_blocks.h"
#include "ops/weighted_rows.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE
using DF = hn::ScalableTag<float>;

// The row layouts a kernel reads.
enum class Rows { kF32, kF16, kQ8_0, kQ4_0 };

// Elements [i, i + lanes) of a row as floats. For the block types a vector
// never straddles two blocks (lanes divide 16) nor, for Q4_0, the low and
// high nibble halves of one.
template <Rows kRows, class D>
HWY_INLINE hn::Vec<D> load_row(D d, const uint8_t* row, int64_t i) {
    if constexpr (kRows == Rows::kF16) {
        const hn::Rebind<hwy::float16_t, D> dh;
        return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + i));
    } else if constexpr (kRows == Rows::kF32) {
        return hn::LoadU(d, reinterpret_cast<const float*>(row) + i);
    } else {
        const hn::RebindToSigned<D> di;
        const int64_t j = i % 32;
        // Blocks are read through bytes: a row need not be 2-byte aligned.
        constexpr size_t kBlockBytes = kRows == Rows::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
        const uint8_t* block = row + static_cast<size_t>(i / 32) * kBlockBytes;
        uint16_t d_bits;
        std::memcpy(&d_bits, block, sizeof d_bits);
        const uint8_t* qs = block + sizeof d_bits;
        if constexpr (kRows == Rows::kQ8_0) {
            const hn::Rebind<int8_t, D> d8;
            const auto q = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(qs) + j)));
            return hn::Mul(q, hn::Set(d, fp16_to_fp32(d_bits)));
        } else {
            const hn::Rebind<uint8_t, D> d8;
            const auto packed = hn::LoadU(d8, qs + (j % 16));
            const auto nibbles = j < 16 ? hn::And(packed, hn::Set(d8, 15)) : hn::ShiftRight<4>(packed);
            const auto q = hn::Sub(hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), nibbles)), hn::Set(di, 8));
            return hn::Mul(hn::ConvertTo(d, q), hn::Set(d, fp16_to_fp32(d_bits)));
        }
    }
}

// Elements [i, i + lanes) of S sets.
template <class D, Rows kRows, int S>
void sets_kernel(const uint8_t* rows, size_t row_stride, int64_t n_rows, const float* weights, size_t w_stride,
                 int64_t i, float* out, size_t out_stride) {
    const D d;
    hn::Vec<D> acc[S];
    for (int j = 0; j < S; ++j) acc[j] = hn::Zero(d);
    for (int64_t r = 0; r < n_rows; ++r) {
        const auto v = load_row<kRows>(d, rows + static_cast<size_t>(r) * row_stride, i);
        for (int j = 0; j < S; ++j) {
            acc[j] = canonical::fused_mul_add(d, hn::Set(d, weights[j * w_stride + r]), v, acc[j]);
        }
    }
    for (int j = 0; j < S; ++j) hn::StoreU(acc[j], d, out + j * out_stride + i);
}

// Elements [begin, end) in vectors of D's lanes, every set; returns where the
// whole vectors end.
template <class D, Rows kRows>
int64_t sweep(const uint8_t* rows, size_t row_stride, int64_t n_rows, const float* weights, size_t w_stride,
              int n_sets, int64_t begin, int64_t end, float* out, size_t out_stride) {
    using Kernel = void (*)(const uint8_t*, size_t, int64_t, const float*, size_t, int64_t, float*, size_t);
    static constexpr Kernel kernels[8] = {sets_kernel<D, kRows, 1>, sets_kernel<D, kRows, 2>,
                                          sets_kernel<D, kRows, 3>, sets_kernel<D, kRows, 4>,
                                          sets_kernel<D, kRows, 5>, sets_kernel<D, kRows, 6>,
                                          sets_kernel<D, kRows, 7>, sets_kernel<D, kRows, 8>};
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(D()));
    const int64_t stop = begin + (end - begin) / lanes * lanes;
    for (int j0 = 0; j0 < n_sets; j0 += 8) {
        const int sets = std::min(8, n_sets - j0);
        for (int64_t i = begin; i < stop; i += lanes) {
            kernels[sets - 1](rows, row_stride, n_rows, weights + j0 * w_stride, w_stride, i, out + j0 * out_stride,
                              out_stride);
        }
    }
    return stop;
}

template <Rows kRows>
void sums(QuantType type, const uint8_t* rows, size_t row_stride, int64_t n_rows, const float* weights,
          size_t w_stride, int n_sets, int64_t n, float* out, size_t out_stride) {
    constexpr bool kBlocks = kRows == Rows::kQ8_0 || kRows == Rows::kQ4_0;
    if constexpr (kBlocks) {
        // Block rows are whole blocks; a vector wider than half a block (none
        // that holds floats today) would straddle the nibble halves.
        if (hn::Lanes(DF()) > 16) {
            weighted_row_sums_scalar(type, rows, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
            return;
        }
        sweep<DF, kRows>(rows, row_stride, n_rows, weights, w_stride, n_sets, 0, n, out, out_stride);
    } else {
        // Float rows of any length: whole vectors, then narrower ones (a head
        // of 8 or 40 elements on a 16-lane CPU), then the reference over the
        // last few elements. Each element is its own chain: the width
        // changes no bit.
        int64_t done = sweep<DF, kRows>(rows, row_stride, n_rows, weights, w_stride, n_sets, 0, n, out, out_stride);
        done = sweep<hn::CappedTag<float, 8>, kRows>(rows, row_stride, n_rows, weights, w_stride, n_sets, done, n, out,
                                                     out_stride);
        done = sweep<hn::CappedTag<float, 4>, kRows>(rows, row_stride, n_rows, weights, w_stride, n_sets, done, n, out,
                                                     out_stride);
        if (done < n) {
            const size_t elem = kRows == Rows::kF16 ? 2 : 4;
            weighted_row_sums_scalar(type, rows + done * elem, row_stride, n_rows, weights, w_stride, n_sets, n - done,
                                     out + done, out_stride);
        }
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
    if ((type == QuantType::Q8_0 || type == QuantType::Q4_0) && n % 32 != 0) {
        throw make_error("internal: weighted row sums of {} rows of {} elements", quant_type_name(type), n);
    }
    switch (type) {
        case QuantType::F32:
            return sums<Rows::kF32>(type, bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
        case QuantType::F16:
            return sums<Rows::kF16>(type, bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
        case QuantType::Q8_0:
            return sums<Rows::kQ8_0>(type, bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
        case QuantType::Q4_0:
            return sums<Rows::kQ4_0>(type, bytes, row_stride, n_rows, weights, w_stride, n_sets, n, out, out_stride);
        default:
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
