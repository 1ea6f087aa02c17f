// Q8_0 and Q4_0 dot products against Q8_0 activations in portable Highway
// ops, for every target without the x86 kernels of dot_int8_x86-inl.h (NEON,
// SVE, SSSE3/SSE4, EMU128): bytes widened to int16, multiplied and summed in
// pairs into int32 (ReorderWidenMulAccumulate), the block's lanes summed to
// one exact integer, then one scalar fused multiply-add per block with the
// product of the two scales, in block order: the canonical order of
// ops/row_groups.h, whatever the vector length. Included by dot_hwy.cpp once
// per target (hence the toggling include guard), inside nothing.

#if defined(TESSERA_OPS_DOT_INT8_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_HWY_INL_H_
#undef TESSERA_OPS_DOT_INT8_HWY_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_HWY_INL_H_
#endif

#include <hwy/highway.h>

#include "ops/quant_traits.h"
#include "util/fp16.h"

#include <cmath>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace portable {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 int16 lanes: a power of two that divides the 16 bytes of a Q4_0
// block and the 32 of a Q8_0 one on every vector length.
using D16 = hn::CappedTag<int16_t, 16>;
using D32 = hn::RepartitionToWide<D16>;

constexpr int64_t kBlockBytesQ4 = 18;
constexpr int64_t kBlockBytesQ8 = 34;

HWY_INLINE float scale_of(const uint8_t* block) {
    uint16_t h;
    std::memcpy(&h, block, 2);
    return fp16_to_fp32(h);
}

HWY_INLINE hn::Vec<D16> load_i8(const uint8_t* p) {
    const D16 d16;
    const hn::Rebind<int8_t, D16> d8;
    return hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p)));
}

// Q4_0 bytes i.. of a block widened to uint16: their low nibbles are weights
// i.., their high nibbles weights 16 + i..; q4_lo / q4_hi subtract the 8.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D16>> load_q4(const uint8_t* qs) {
    const hn::RebindToUnsigned<D16> du16;
    const hn::Rebind<uint8_t, D16> du8;
    return hn::PromoteTo(du16, hn::LoadU(du8, qs));
}
HWY_INLINE hn::Vec<D16> q4_lo(hn::Vec<hn::RebindToUnsigned<D16>> q) {
    const D16 d16;
    return hn::Sub(hn::BitCast(d16, hn::And(q, hn::Set(hn::RebindToUnsigned<D16>(), 0x0F))), hn::Set(d16, 8));
}
HWY_INLINE hn::Vec<D16> q4_hi(hn::Vec<hn::RebindToUnsigned<D16>> q) {
    const D16 d16;
    return hn::Sub(hn::BitCast(d16, hn::ShiftRight<4>(q)), hn::Set(d16, 8));
}

// A block's integer products, summed over the lanes: exact in any order.
HWY_INLINE float block_sum(hn::Vec<D32> s0, hn::Vec<D32> s1) {
    const D32 d32;
    return static_cast<float>(hn::GetLane(hn::SumOfLanes(d32, hn::Add(s0, s1))));
}

// One weight row against one activation row (no arrays of vectors, which
// scalable targets cannot hold).
template <bool kQ4>
float int8_dot(int64_t n, const void* w, const void* x) {
    constexpr int64_t wbytes = kQ4 ? kBlockBytesQ4 : kBlockBytesQ8;
    const D16 d16;
    const D32 d32;
    const size_t N = hn::Lanes(d16);
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* wr = wb + b * wbytes;
        const uint8_t* xr = xb + b * kBlockBytesQ8;
        auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
        if constexpr (kQ4) {
            for (size_t i = 0; i < 16; i += N) {
                const auto q = load_q4(wr + 2 + i);
                s0 = hn::ReorderWidenMulAccumulate(d32, q4_lo(q), load_i8(xr + 2 + i), s0, s1);
                s0 = hn::ReorderWidenMulAccumulate(d32, q4_hi(q), load_i8(xr + 2 + 16 + i), s0, s1);
            }
        } else {
            for (size_t i = 0; i < 32; i += N) {
                s0 = hn::ReorderWidenMulAccumulate(d32, load_i8(wr + 2 + i), load_i8(xr + 2 + i), s0, s1);
            }
        }
        acc = std::fma(block_sum(s0, s1), scale_of(wr) * scale_of(xr), acc);
    }
    return acc;
}

inline float q8_0_dot(int64_t n, const void* w, const void* x) { return int8_dot<false>(n, w, x); }
inline float q4_0_dot(int64_t n, const void* w, const void* x) { return int8_dot<true>(n, w, x); }

#if !HWY_HAVE_SCALABLE
// R weight rows x C activation rows: per step each weight chunk is widened
// once for C columns and each activation chunk once for R rows. Integer sums
// per block, then one scalar FMA per cell with the scales' product.
template <bool kQ4, int R, int C>
void int8_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
               size_t y_stride) {
    constexpr int64_t wbytes = kQ4 ? kBlockBytesQ4 : kBlockBytesQ8;
    const D16 d16;
    const D32 d32;
    const size_t N = hn::Lanes(d16);
    float acc[R][C] = {};
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* wb[R];
        const uint8_t* xb[C];
        for (int r = 0; r < R; ++r) wb[r] = w + r * w_stride + b * wbytes;
        for (int c = 0; c < C; ++c) xb[c] = x + c * x_stride + b * kBlockBytesQ8;
        // Pairs of int32 partial sums (the widening multiply-add's two halves).
        hn::Vec<D32> s0[R][C], s1[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) s0[r][c] = s1[r][c] = hn::Zero(d32);
        if constexpr (kQ4) {
            for (size_t i = 0; i < 16; i += N) {
                hn::Vec<D16> ylo[C], yhi[C];
                for (int c = 0; c < C; ++c) {
                    ylo[c] = load_i8(xb[c] + 2 + i);
                    yhi[c] = load_i8(xb[c] + 2 + 16 + i);
                }
                for (int r = 0; r < R; ++r) {
                    const auto q = load_q4(wb[r] + 2 + i);
                    const auto lo = q4_lo(q), hi = q4_hi(q);
                    for (int c = 0; c < C; ++c) {
                        s0[r][c] = hn::ReorderWidenMulAccumulate(d32, lo, ylo[c], s0[r][c], s1[r][c]);
                        s0[r][c] = hn::ReorderWidenMulAccumulate(d32, hi, yhi[c], s0[r][c], s1[r][c]);
                    }
                }
            }
        } else {
            for (size_t i = 0; i < 32; i += N) {
                hn::Vec<D16> yv[C];
                for (int c = 0; c < C; ++c) yv[c] = load_i8(xb[c] + 2 + i);
                for (int r = 0; r < R; ++r) {
                    const auto wv = load_i8(wb[r] + 2 + i);
                    for (int c = 0; c < C; ++c) {
                        s0[r][c] = hn::ReorderWidenMulAccumulate(d32, wv, yv[c], s0[r][c], s1[r][c]);
                    }
                }
            }
        }
        float dx[C];
        for (int c = 0; c < C; ++c) dx[c] = scale_of(xb[c]);
        for (int r = 0; r < R; ++r) {
            const float dw = scale_of(wb[r]);
            for (int c = 0; c < C; ++c) acc[r][c] = std::fma(block_sum(s0[r][c], s1[r][c]), dw * dx[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c];
}

// Any tile shape as register tiles of at most 2 x 2 (small enough for the
// 16 registers of SSE4 and the partial sums of NEON's 32).
template <bool kQ4>
void int8_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                       int n_cols, float* y, size_t y_stride) {
    using Kernel = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);
    static constexpr Kernel kernels[2][2] = {
        {int8_tile<kQ4, 1, 1>, int8_tile<kQ4, 1, 2>},
        {int8_tile<kQ4, 2, 1>, int8_tile<kQ4, 2, 2>},
    };
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int r0 = 0; r0 < n_rows; r0 += 2) {
        const int rr = n_rows - r0 < 2 ? n_rows - r0 : 2;
        for (int c0 = 0; c0 < n_cols; c0 += 2) {
            const int cc = n_cols - c0 < 2 ? n_cols - c0 : 2;
            kernels[rr - 1][cc - 1](n, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride,
                                    y + c0 * y_stride + r0, y_stride);
        }
    }
}
#else
// Scalable vectors cannot be held in arrays: tiles as single dot products.
template <bool kQ4>
void int8_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                       int n_cols, float* y, size_t y_stride) {
    vec_dot_tile_by_dots<int8_dot<kQ4>>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
}
#endif  // !HWY_HAVE_SCALABLE

}  // namespace portable
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // include guard
