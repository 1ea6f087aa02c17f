// Q8_0 and Q4_0 dot products against Q8_0 activations with x86 intrinsics,
// for the AVX2, AVX3 (AVX-512) and AVX3_DL (AVX-512 + VNNI) targets. Highway
// 1.0.3 wraps no 8-bit multiply-add, so these use maddubs+madd or, with VNNI,
// dpbusd through intrinsics; every other target uses the
// portable kernels of dot_int8_hwy-inl.h. Included by dot_hwy.cpp once per
// target (hence the toggling include guard), inside nothing.
//
// Q4_0 . Q8_0 per block: sum((nib - 8) * y) = sum(nib * y) - 8 * sum(y), both
// unsigned x signed byte products; the -8 * sum(y) term is computed once per
// activation block and seeds the accumulator of the nibble products.
// Q8_0 . Q8_0 uses |w| and y * sign(w) (maddubs saturates pairs at int16, and
// 255 * 127 * 2 would not fit), or with VNNI (no saturation) (y + 128) * w,
// seeded with -128 * sum(w). Activations never hold -128 (Q8_0 quantizes to
// [-127, 127]), so y * sign(w) and y + 128 stay within a byte.
//
// Each cell (a row against a column) sums a block's integer products in 8
// int32 lanes, adds the lanes to one exact integer and takes one scalar
// fused multiply-add with the scales' product, block after block: the
// canonical order of ops/row_groups.h, the bits of the scalar reference and
// of every other target (attention over block keys reads rows this way).
// Tiles hold R rows x C columns of such cells; on AVX3_DL tiles of many
// columns run 16 rows per vector instead (dot_int8_vnni-inl.h, one row per
// lane: the same order).

#if defined(TESSERA_OPS_DOT_INT8_X86_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_X86_INL_H_
#undef TESSERA_OPS_DOT_INT8_X86_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_X86_INL_H_
#endif

#include <hwy/highway.h>

#include "ops/dot_int8_vnni-inl.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include "ops/vnni_target.h"

#if HWY_TARGET == HWY_AVX3_DL
TESSERA_VNNI_PUSH
#endif
HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3 selects this target by the AVX512-VNNI CPUID bit but compiles
// it for AVX-VNNI (the VEX form, absent on Ice Lake servers); ask for the EVEX
// form the selection guarantees, and use only 512-bit dpbusd.
TESSERA_VNNI_BEGIN
#endif
namespace tessera {
namespace HWY_NAMESPACE {
namespace x86 {

constexpr int64_t kBlockBytesQ4 = 18;
constexpr int64_t kBlockBytesQ8 = 34;

// ---- One block per 256-bit vector (AVX2, and odd last blocks on AVX-512) ----

// acc + sum over groups of 4 of (unsigned u) * (signed s), in 8 int32 lanes.
HWY_INLINE __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if HWY_TARGET == HWY_AVX3_DL
    // The 512-bit (EVEX) form on the low half: the 256-bit intrinsic would be
    // emitted in its VEX (AVX-VNNI) form, which this target does not check for.
    return _mm512_castsi512_si256(_mm512_dpbusd_epi32(_mm512_zextsi256_si512(acc), _mm512_zextsi256_si512(u),
                                                      _mm512_zextsi256_si512(s)));
#else
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

// The block's fp16 scale, converted by the F16C instruction every AVX2 CPU
// has (the portable fp16 conversion would cost more than the block's dot).
HWY_INLINE float scale_of(const uint8_t* block) {
    uint16_t h;
    std::memcpy(&h, block, 2);
    return _cvtsh_ss(h);
}

// The 32 weights of a Q4_0 block as bytes 0..15 (elements 0..15 from the low
// nibbles, 16..31 from the high ones, matching the activation's order).
HWY_INLINE __m256i q4_0_nibbles(const uint8_t* block) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

HWY_INLINE __m256i q8_0_values(const uint8_t* block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
}

// -8 * sum(y) in 8 lanes: the Q4_0 offset's share of a block dot.
HWY_INLINE __m256i minus_eight_sum(__m256i y) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), dot_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(8), y));
}

// Integer dot of one weight block with one activation block, in 8 lanes.
HWY_INLINE __m256i q4_0_block_dot(__m256i nib, __m256i y, __m256i minus_eight_y) {
    return dot_u8s8(minus_eight_y, nib, y);
}
HWY_INLINE __m256i q8_0_block_dot(__m256i w, __m256i y) {
    return dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}

// The lanes of a block's integer sum added: exact in any order.
HWY_INLINE float block_sum(__m256i i) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return static_cast<float>(_mm_cvtsi128_si32(s));
}

// ---- vec_dot ----

inline float q4_0_dot(int64_t n, const void* w, const void* x) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* w0 = wb + b * kBlockBytesQ4;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i y0 = q8_0_values(x0);
        const __m256i i0 = q4_0_block_dot(q4_0_nibbles(w0), y0, minus_eight_sum(y0));
        acc = std::fma(block_sum(i0), scale_of(w0) * scale_of(x0), acc);
    }
    return acc;
}

inline float q8_0_dot(int64_t n, const void* w, const void* x) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* w0 = wb + b * kBlockBytesQ8;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i i0 = q8_0_block_dot(q8_0_values(w0), q8_0_values(x0));
        acc = std::fma(block_sum(i0), scale_of(w0) * scale_of(x0), acc);
    }
    return acc;
}

// ---- Register tiles ----

// Fetches the weight bytes [p, p + kSpan) of the rows two tiles ahead: R
// interleaved short row streams defeat the hardware prefetcher, and one tile
// ahead is too late for a matrix-vector product streaming from memory. Both
// ends, so a span over 64 bytes misses no line.
template <int64_t kSpan>
HWY_INLINE void prefetch_ahead(const uint8_t* p) {
    static_assert(kSpan <= 128, "two lines at most");
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + kSpan - 1), _MM_HINT_T0);
}
constexpr int kPrefetchTiles = 2;

// R weight rows x C activation rows, one block per step: each weight block is
// unpacked once for C columns, each activation block (and its offset term)
// loaded once for R rows.
template <bool kQ4, int R, int C>
void int8_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
               size_t y_stride) {
    constexpr int64_t wbytes = kQ4 ? kBlockBytesQ4 : kBlockBytesQ8;
    float acc[R][C] = {};
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; ++b) {
        __m256i yv[C];
        __m256i offset[C];
        float dx[C];
        for (int c = 0; c < C; ++c) {
            const uint8_t* xc = x + c * x_stride + b * kBlockBytesQ8;
            yv[c] = q8_0_values(xc);
            if constexpr (kQ4) offset[c] = minus_eight_sum(yv[c]);
            dx[c] = scale_of(xc);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wr = w + r * w_stride + b * wbytes;
            prefetch_ahead<wbytes>(wr + kPrefetchTiles * R * w_stride);
            const float dw = scale_of(wr);
            if constexpr (kQ4) {
                const __m256i nib = q4_0_nibbles(wr);
                for (int c = 0; c < C; ++c) {
                    acc[r][c] = std::fma(block_sum(q4_0_block_dot(nib, yv[c], offset[c])), dw * dx[c], acc[r][c]);
                }
            } else {
                const __m256i wv = q8_0_values(wr);
                const __m256i wabs = _mm256_sign_epi8(wv, wv);
                for (int c = 0; c < C; ++c) {
                    const __m256i i = dot_u8s8(_mm256_setzero_si256(), wabs, _mm256_sign_epi8(yv[c], wv));
                    acc[r][c] = std::fma(block_sum(i), dw * dx[c], acc[r][c]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c];
}

using TileKernel = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);

// kernels[(rows - 1) * kC + cols - 1] is the rows x cols register tile.
template <bool kQ4, int kC, size_t... I>
constexpr std::array<TileKernel, sizeof...(I)> tile_kernels(std::index_sequence<I...>) {
    return {&int8_tile<kQ4, static_cast<int>(I) / kC + 1, static_cast<int>(I) % kC + 1>...};
}

// Any tile shape as register tiles of at most kR x kC (the edges as smaller
// instantiations).
template <bool kQ4>
void int8_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                       int n_cols, float* y, size_t y_stride) {
    // The accumulators are scalars now; each step holds C activation blocks
    // and one weight block in registers.
    constexpr int kR = 2, kC = 4;
    static constexpr auto kernels = tile_kernels<kQ4, kC>(std::make_index_sequence<kR * kC>());
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
#if HWY_TARGET == HWY_AVX3_DL
    // Many columns: 16 rows per vector (dot_int8_vnni-inl.h); the gathers'
    // int32 offsets limit the row stride.
    if (n_cols >= vnni::kMinCols<kQ4> && n_rows >= vnni::kRows && w_stride <= (1u << 26)) {
        const int rows = n_rows - n_rows % vnni::kRows;
        vnni::row_lane_tile<kQ4>(n, wb, w_stride, rows, xb, x_stride, n_cols, y, y_stride);
        wb += rows * w_stride;
        y += rows;
        n_rows -= rows;
    }
#endif
    for (int r0 = 0; r0 < n_rows; r0 += kR) {
        const int rr = n_rows - r0 < kR ? n_rows - r0 : kR;
        for (int c0 = 0; c0 < n_cols; c0 += kC) {
            const int cc = n_cols - c0 < kC ? n_cols - c0 : kC;
            kernels[(rr - 1) * kC + cc - 1](n, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride,
                                            y + c0 * y_stride + r0, y_stride);
        }
    }
}

}  // namespace x86
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
TESSERA_VNNI_POP
#endif

#endif  // x86 int8 targets
#endif  // include guard
