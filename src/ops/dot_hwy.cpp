// SIMD dot products for F32, F16, Q8_0 and Q4_0 weights (see dot_kernels.h).
//
// Float types use portable Highway ops on every target. The 8-bit block types
// need an 8-bit multiply-add that Highway 1.0.3 does not wrap, so on x86 the
// AVX2 / AVX-512 targets use maddubs+madd or, where the CPU has VNNI
// (AVX3_DL), dpbusd; other targets use the scalar reference for those types.
//
// Q4_0 . Q8_0 per block: sum((nib - 8) * y) = sum(nib * y) - 8 * sum(y), both
// as unsigned x signed byte products; Q8_0 . Q8_0 uses |w| and y * sign(w).
// Activations never hold -128 (Q8_0 quantizes to [-127, 127]), so the sign
// trick cannot overflow, and pair sums stay within int16 (2 * 128 * 127).
#define HWY_WANT_AVX3_DL  // compile the VNNI target too (Zen 4, Ice Lake and later)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/dot_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/dot_kernels.h"
#include "ops/quant_blocks.h"
#include "util/fp16.h"

#include <cmath>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- F32 and F16 weights against F32 activations (portable Highway) ----

using DF = hn::ScalableTag<float>;

// Loads lanes of a weight row as float: F32 directly, F16 promoted.
template <bool kHalf>
HWY_INLINE hn::Vec<DF> load_weights(DF d, const uint8_t* w, int64_t i) {
    if constexpr (kHalf) {
        const hn::Rebind<hwy::float16_t, DF> dh;
        return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w) + i));
    } else {
        return hn::LoadU(d, reinterpret_cast<const float*>(w) + i);
    }
}

template <bool kHalf>
HWY_INLINE float weight_scalar(const uint8_t* w, int64_t i) {
    if constexpr (kHalf) {
        uint16_t h;
        std::memcpy(&h, w + 2 * i, 2);
        return fp16_to_fp32(h);
    } else {
        float f;
        std::memcpy(&f, w + 4 * i, 4);
        return f;
    }
}

// R weight rows x C activation rows, all in registers.
template <bool kHalf, int R, int C>
HWY_INLINE void float_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                           size_t y_stride) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    hn::Vec<DF> acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
        hn::Vec<DF> xv[C];
        for (int c = 0; c < C; ++c) xv[c] = hn::LoadU(d, reinterpret_cast<const float*>(x + c * x_stride) + i);
        for (int r = 0; r < R; ++r) {
            const auto wv = load_weights<kHalf>(d, w + r * w_stride, i);
            for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(wv, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            float sum = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
            for (int64_t j = i; j < n; ++j) {
                float xj;
                std::memcpy(&xj, x + c * x_stride + 4 * j, 4);
                sum += weight_scalar<kHalf>(w + r * w_stride, j) * xj;
            }
            y[c * y_stride + r] = sum;
        }
    }
}

template <bool kHalf>
float float_dot(int64_t n, const void* w, const void* x) {
    // Four independent accumulators hide the FMA latency on long rows.
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xf = static_cast<const uint8_t*>(x);
    auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    int64_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) {
        a0 = hn::MulAdd(load_weights<kHalf>(d, wb, i), hn::LoadU(d, reinterpret_cast<const float*>(xf) + i), a0);
        a1 = hn::MulAdd(load_weights<kHalf>(d, wb, i + N), hn::LoadU(d, reinterpret_cast<const float*>(xf) + i + N), a1);
        a2 = hn::MulAdd(load_weights<kHalf>(d, wb, i + 2 * N), hn::LoadU(d, reinterpret_cast<const float*>(xf) + i + 2 * N), a2);
        a3 = hn::MulAdd(load_weights<kHalf>(d, wb, i + 3 * N), hn::LoadU(d, reinterpret_cast<const float*>(xf) + i + 3 * N), a3);
    }
    for (; i + N <= n; i += N) {
        a0 = hn::MulAdd(load_weights<kHalf>(d, wb, i), hn::LoadU(d, reinterpret_cast<const float*>(xf) + i), a0);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
    for (; i < n; ++i) {
        float xi;
        std::memcpy(&xi, xf + 4 * i, 4);
        sum += weight_scalar<kHalf>(wb, i) * xi;
    }
    return sum;
}

// Runs a tile of any shape as register tiles of at most R x C.
template <int R, int C, typename Kernel>
HWY_INLINE void tile_by_blocks(int n_rows, int n_cols, Kernel kernel) {
    for (int r0 = 0; r0 < n_rows; r0 += R) {
        const int rr = n_rows - r0 < R ? n_rows - r0 : R;
        for (int c0 = 0; c0 < n_cols; c0 += C) {
            const int cc = n_cols - c0 < C ? n_cols - c0 : C;
            kernel(r0, rr, c0, cc);
        }
    }
}

template <bool kHalf>
void float_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                        int n_cols, float* y, size_t y_stride) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    tile_by_blocks<2, 4>(n_rows, n_cols, [&](int r0, int rr, int c0, int cc) {
        const uint8_t* wr = wb + r0 * w_stride;
        const uint8_t* xc = xb + c0 * x_stride;
        float* yt = y + c0 * y_stride + r0;
#define TESSERA_FLOAT_TILE(R_, C_) \
    if (rr == R_ && cc == C_) return float_tile<kHalf, R_, C_>(n, wr, w_stride, xc, x_stride, yt, y_stride);
        TESSERA_FLOAT_TILE(2, 4)
        TESSERA_FLOAT_TILE(2, 3)
        TESSERA_FLOAT_TILE(2, 2)
        TESSERA_FLOAT_TILE(2, 1)
        TESSERA_FLOAT_TILE(1, 4)
        TESSERA_FLOAT_TILE(1, 3)
        TESSERA_FLOAT_TILE(1, 2)
        TESSERA_FLOAT_TILE(1, 1)
#undef TESSERA_FLOAT_TILE
    });
}

void f16_to_float_simd(const void* src, float* dst, int64_t n) {
    const DF d;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto* h = static_cast<const hwy::float16_t*>(src);
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, h + i)), d, dst + i);
    for (; i < n; ++i) dst[i] = weight_scalar<true>(static_cast<const uint8_t*>(src), i);
}

// ---- Q8_0 activation quantizer (portable Highway) ----

// Bytes identical to the scalar reference: the same amax, the same float
// division for d and 1/d, and std::round's half-away-from-zero rounding as
// trunc(v + copysign(0.49999997, v)), exact for |v| < 2^23 (here |v| <= 127).
void q8_0_from_float_simd(const float* src, void* dst, int64_t n) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const hn::RebindToSigned<DF> di;
    auto* out = static_cast<uint8_t*>(dst);
    HWY_ALIGN int32_t q[32 + hn::MaxLanes(di)];
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        float amax = 0.0f;
        int64_t i = 0;
        if (N <= 32) {
            auto m = hn::Zero(d);
            for (; i + N <= 32; i += N) m = hn::Max(m, hn::Abs(hn::LoadU(d, x + i)));
            amax = hn::GetLane(hn::MaxOfLanes(d, m));
        }
        for (; i < 32; ++i) amax = amax > std::fabs(x[i]) ? amax : std::fabs(x[i]);
        const float scale = amax / 127.0f;
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        const auto vinv = hn::Set(d, inv);
        const auto half = hn::Set(d, 0.49999997f);
        i = 0;
        if (N <= 32) {
            for (; i + N <= 32; i += N) {
                const auto v = hn::Mul(hn::LoadU(d, x + i), vinv);
                hn::Store(hn::ConvertTo(di, hn::Trunc(hn::Add(v, hn::CopySign(half, v)))), di, q + i);
            }
        }
        for (; i < 32; ++i) q[i] = static_cast<int32_t>(std::round(x[i] * inv));
        uint8_t* block = out + b * 34;
        const uint16_t h = fp32_to_fp16(scale);
        std::memcpy(block, &h, 2);
        for (int k = 0; k < 32; ++k) block[2 + k] = static_cast<uint8_t>(static_cast<int8_t>(q[k]));
    }
}

// ---- 8-bit blocks (x86 AVX2 / AVX-512 only) ----

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define TESSERA_X86_INT8 1
#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3 selects this target by the AVX512-VNNI CPUID bit but compiles
// it for AVX-VNNI (the VEX form, absent on Ice Lake servers); ask for the EVEX
// form the selection guarantees.
#pragma GCC target("avx512vnni")
#endif

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

HWY_INLINE float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
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

// Integer dot of one weight block with one activation block, in 8 lanes.
// For Q4_0, `eight_y` is 8 * sum(y) for that activation block.
HWY_INLINE __m256i q4_0_block_dot(__m256i nib, __m256i y, __m256i eight_y) {
    return _mm256_sub_epi32(dot_u8s8(_mm256_setzero_si256(), nib, y), eight_y);
}
HWY_INLINE __m256i eight_times_sum(__m256i y) { return dot_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(8), y); }
HWY_INLINE __m256i q8_0_block_dot(__m256i w, __m256i y) {
    return dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}

constexpr int64_t kBlockBytesQ4 = 18;
constexpr int64_t kBlockBytesQ8 = 34;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512: two blocks per instruction. Lanes 0-7 hold block b, lanes 8-15
// block b + 1, so one float FMA applies both blocks' scales.
HWY_INLINE __m512i dot_u8s8_512(__m512i acc, __m512i u, __m512i s) {
#if HWY_TARGET == HWY_AVX3_DL
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    const __m512i pairs = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
#endif
}

HWY_INLINE __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Scales d0 * e0 in lanes 0-7 and d1 * e1 in lanes 8-15.
HWY_INLINE __m512 pair_scales(const uint8_t* w0, const uint8_t* w1, const uint8_t* x0, const uint8_t* x1) {
    return _mm512_insertf32x8(_mm512_set1_ps(scale_of(w0) * scale_of(x0)), _mm256_set1_ps(scale_of(w1) * scale_of(x1)), 1);
}

HWY_INLINE float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }
#endif

float q4_0_dot(int64_t n, const void* w, const void* x) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t nb = n / 32;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    __m512 acc512 = _mm512_setzero_ps();
    for (; b + 2 <= nb; b += 2) {
        const uint8_t* w0 = wb + b * kBlockBytesQ4;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m512i nib = join(q4_0_nibbles(w0), q4_0_nibbles(w0 + kBlockBytesQ4));
        const __m512i y = join(q8_0_values(x0), q8_0_values(x0 + kBlockBytesQ8));
        const __m512i eight_y = dot_u8s8_512(_mm512_setzero_si512(), _mm512_set1_epi8(8), y);
        const __m512i i = _mm512_sub_epi32(dot_u8s8_512(_mm512_setzero_si512(), nib, y), eight_y);
        acc512 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i),
                                 pair_scales(w0, w0 + kBlockBytesQ4, x0, x0 + kBlockBytesQ8), acc512);
    }
    acc0 = _mm256_add_ps(_mm512_castps512_ps256(acc512), _mm512_extractf32x8_ps(acc512, 1));
#endif
    for (; b + 2 <= nb; b += 2) {
        const uint8_t* w0 = wb + b * kBlockBytesQ4;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i y0 = q8_0_values(x0), y1 = q8_0_values(x0 + kBlockBytesQ8);
        const __m256i i0 = q4_0_block_dot(q4_0_nibbles(w0), y0, eight_times_sum(y0));
        const __m256i i1 = q4_0_block_dot(q4_0_nibbles(w0 + kBlockBytesQ4), y1, eight_times_sum(y1));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(scale_of(w0) * scale_of(x0)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1),
                               _mm256_set1_ps(scale_of(w0 + kBlockBytesQ4) * scale_of(x0 + kBlockBytesQ8)), acc1);
    }
    for (; b < nb; ++b) {
        const uint8_t* w0 = wb + b * kBlockBytesQ4;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i y0 = q8_0_values(x0);
        const __m256i i0 = q4_0_block_dot(q4_0_nibbles(w0), y0, eight_times_sum(y0));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(scale_of(w0) * scale_of(x0)), acc0);
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

float q8_0_dot(int64_t n, const void* w, const void* x) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    const int64_t nb = n / 32;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    __m512 acc512 = _mm512_setzero_ps();
    for (; b + 2 <= nb; b += 2) {
        const uint8_t* w0 = wb + b * kBlockBytesQ8;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m512i wv = join(q8_0_values(w0), q8_0_values(w0 + kBlockBytesQ8));
        const __m512i y = join(q8_0_values(x0), q8_0_values(x0 + kBlockBytesQ8));
        // |w| and y * sign(w): AVX-512 has no sign_epi8, so negate by mask.
        const __mmask64 negative = _mm512_movepi8_mask(wv);
        const __m512i sy = _mm512_mask_sub_epi8(y, negative, _mm512_setzero_si512(), y);
        const __m512i i = dot_u8s8_512(_mm512_setzero_si512(), _mm512_abs_epi8(wv), sy);
        acc512 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i),
                                 pair_scales(w0, w0 + kBlockBytesQ8, x0, x0 + kBlockBytesQ8), acc512);
    }
    acc0 = _mm256_add_ps(_mm512_castps512_ps256(acc512), _mm512_extractf32x8_ps(acc512, 1));
#endif
    for (; b + 2 <= nb; b += 2) {
        const uint8_t* w0 = wb + b * kBlockBytesQ8;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i i0 = q8_0_block_dot(q8_0_values(w0), q8_0_values(x0));
        const __m256i i1 = q8_0_block_dot(q8_0_values(w0 + kBlockBytesQ8), q8_0_values(x0 + kBlockBytesQ8));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(scale_of(w0) * scale_of(x0)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1),
                               _mm256_set1_ps(scale_of(w0 + kBlockBytesQ8) * scale_of(x0 + kBlockBytesQ8)), acc1);
    }
    for (; b < nb; ++b) {
        const uint8_t* w0 = wb + b * kBlockBytesQ8;
        const uint8_t* x0 = xb + b * kBlockBytesQ8;
        const __m256i i0 = q8_0_block_dot(q8_0_values(w0), q8_0_values(x0));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(scale_of(w0) * scale_of(x0)), acc0);
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

// R weight rows x C activation rows: each weight block is unpacked once for
// C columns, each activation block (and its sum) loaded once for R rows.
template <bool kQ4, int R, int C>
HWY_INLINE void int8_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                          size_t y_stride) {
    constexpr int64_t wbytes = kQ4 ? kBlockBytesQ4 : kBlockBytesQ8;
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; ++b) {
        __m256i yv[C];
        __m256i ys[C];
        float dx[C];
        for (int c = 0; c < C; ++c) {
            const uint8_t* xc = x + c * x_stride + b * kBlockBytesQ8;
            yv[c] = q8_0_values(xc);
            if constexpr (kQ4) ys[c] = eight_times_sum(yv[c]);
            dx[c] = scale_of(xc);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wr = w + r * w_stride + b * wbytes;
            const float dw = scale_of(wr);
            if constexpr (kQ4) {
                const __m256i nib = q4_0_nibbles(wr);
                for (int c = 0; c < C; ++c) {
                    const __m256i i = q4_0_block_dot(nib, yv[c], ys[c]);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(dw * dx[c]), acc[r][c]);
                }
            } else {
                const __m256i wv = q8_0_values(wr);
                const __m256i wabs = _mm256_sign_epi8(wv, wv);
                for (int c = 0; c < C; ++c) {
                    const __m256i i = dot_u8s8(_mm256_setzero_si256(), wabs, _mm256_sign_epi8(yv[c], wv));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(dw * dx[c]), acc[r][c]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum(acc[r][c]);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 register tile: two blocks per step (lanes 0-7 block b, 8-15 block
// b + 1). Per step each activation pair is loaded (and for Q4_0 summed) once
// for R rows, each weight pair unpacked once for C columns; the scales of a
// pair multiply as vectors [d_b x8 | d_b+1 x8].
template <bool kQ4, int R, int C>
HWY_INLINE void int8_tile512(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride,
                             float* y, size_t y_stride) {
    constexpr int64_t wbytes = kQ4 ? kBlockBytesQ4 : kBlockBytesQ8;
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i yv[C];
        __m512i ys[C];
        __m512 dx[C];
        for (int c = 0; c < C; ++c) {
            const uint8_t* xc = x + c * x_stride + b * kBlockBytesQ8;
            yv[c] = join(q8_0_values(xc), q8_0_values(xc + kBlockBytesQ8));
            if constexpr (kQ4) ys[c] = dot_u8s8_512(_mm512_setzero_si512(), _mm512_set1_epi8(8), yv[c]);
            dx[c] = _mm512_insertf32x8(_mm512_set1_ps(scale_of(xc)), _mm256_set1_ps(scale_of(xc + kBlockBytesQ8)), 1);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wr = w + r * w_stride + b * wbytes;
            // The rows of the next tile, one tile ahead: R interleaved short
            // streams are too short for the hardware prefetcher to learn.
            _mm_prefetch(reinterpret_cast<const char*>(wr + R * w_stride), _MM_HINT_T0);
            const __m512 dw =
                _mm512_insertf32x8(_mm512_set1_ps(scale_of(wr)), _mm256_set1_ps(scale_of(wr + wbytes)), 1);
            if constexpr (kQ4) {
                const __m512i nib = join(q4_0_nibbles(wr), q4_0_nibbles(wr + wbytes));
                for (int c = 0; c < C; ++c) {
                    const __m512i i = _mm512_sub_epi32(dot_u8s8_512(_mm512_setzero_si512(), nib, yv[c]), ys[c]);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(dw, dx[c]), acc[r][c]);
                }
            } else {
                const __m512i wv = join(q8_0_values(wr), q8_0_values(wr + wbytes));
                const __mmask64 negative = _mm512_movepi8_mask(wv);
                const __m512i wabs = _mm512_abs_epi8(wv);
                for (int c = 0; c < C; ++c) {
                    const __m512i sy = _mm512_mask_sub_epi8(yv[c], negative, _mm512_setzero_si512(), yv[c]);
                    const __m512i i = dot_u8s8_512(_mm512_setzero_si512(), wabs, sy);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(dw, dx[c]), acc[r][c]);
                }
            }
        }
    }
    // An odd last block: one 256-bit step per cell.
    float tail[R][C] = {};
    if (b < nb) {
        for (int c = 0; c < C; ++c) {
            const uint8_t* xc = x + c * x_stride + b * kBlockBytesQ8;
            const __m256i yc = q8_0_values(xc);
            const __m256i eight_y = eight_times_sum(yc);
            for (int r = 0; r < R; ++r) {
                const uint8_t* wr = w + r * w_stride + b * wbytes;
                const __m256i i = kQ4 ? q4_0_block_dot(q4_0_nibbles(wr), yc, eight_y)
                                      : q8_0_block_dot(q8_0_values(wr), yc);
                tail[r][c] = hsum(_mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(scale_of(wr) * scale_of(xc))));
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum512(acc[r][c]) + tail[r][c];
}
#endif

template <bool kQ4>
void int8_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                       int n_cols, float* y, size_t y_stride) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    // 32 registers: 4 x 4 accumulators plus operands; a single column (a
    // matrix-vector product) runs 4 rows at once on one activation load.
    tile_by_blocks<4, 4>(n_rows, n_cols, [&](int r0, int rr, int c0, int cc) {
        const uint8_t* wr = wb + r0 * w_stride;
        const uint8_t* xc = xb + c0 * x_stride;
        float* yt = y + c0 * y_stride + r0;
#define TESSERA_INT8_TILE(R_, C_) \
    if (rr == R_ && cc == C_) return int8_tile512<kQ4, R_, C_>(n, wr, w_stride, xc, x_stride, yt, y_stride);
        TESSERA_INT8_TILE(4, 4)
        TESSERA_INT8_TILE(4, 3)
        TESSERA_INT8_TILE(4, 2)
        TESSERA_INT8_TILE(4, 1)
        TESSERA_INT8_TILE(3, 4)
        TESSERA_INT8_TILE(3, 3)
        TESSERA_INT8_TILE(3, 2)
        TESSERA_INT8_TILE(3, 1)
        TESSERA_INT8_TILE(2, 4)
        TESSERA_INT8_TILE(2, 3)
        TESSERA_INT8_TILE(2, 2)
        TESSERA_INT8_TILE(2, 1)
        TESSERA_INT8_TILE(1, 4)
        TESSERA_INT8_TILE(1, 3)
        TESSERA_INT8_TILE(1, 2)
        TESSERA_INT8_TILE(1, 1)
#undef TESSERA_INT8_TILE
    });
#else
    // 2 x 4 accumulators plus operands fit AVX2's 16 registers.
    tile_by_blocks<2, 4>(n_rows, n_cols, [&](int r0, int rr, int c0, int cc) {
        const uint8_t* wr = wb + r0 * w_stride;
        const uint8_t* xc = xb + c0 * x_stride;
        float* yt = y + c0 * y_stride + r0;
#define TESSERA_INT8_TILE(R_, C_) \
    if (rr == R_ && cc == C_) return int8_tile<kQ4, R_, C_>(n, wr, w_stride, xc, x_stride, yt, y_stride);
        TESSERA_INT8_TILE(2, 4)
        TESSERA_INT8_TILE(2, 3)
        TESSERA_INT8_TILE(2, 2)
        TESSERA_INT8_TILE(2, 1)
        TESSERA_INT8_TILE(1, 4)
        TESSERA_INT8_TILE(1, 3)
        TESSERA_INT8_TILE(1, 2)
        TESSERA_INT8_TILE(1, 1)
#undef TESSERA_INT8_TILE
    });
#endif
}

#endif  // x86 int8 targets

const QuantTraits* BlockTraits(QuantType type) {
    static const QuantTraits f32 = [] {
        QuantTraits t = *scalar_traits(QuantType::F32);
        t.vec_dot = float_dot<false>;
        t.vec_dot_tile = float_vec_dot_tile<false>;
        return t;
    }();
    static const QuantTraits f16 = [] {
        QuantTraits t = *scalar_traits(QuantType::F16);
        t.to_float = f16_to_float_simd;
        t.vec_dot = float_dot<true>;
        t.vec_dot_tile = float_vec_dot_tile<true>;
        return t;
    }();
    static const QuantTraits q8_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::Q8_0);
        t.from_float = q8_0_from_float_simd;
#ifdef TESSERA_X86_INT8
        t.vec_dot = q8_0_dot;
        t.vec_dot_tile = int8_vec_dot_tile<false>;
#endif
        return t;
    }();
    static const QuantTraits q4_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::Q4_0);
#ifdef TESSERA_X86_INT8
        t.vec_dot = q4_0_dot;
        t.vec_dot_tile = int8_vec_dot_tile<true>;
#endif
        return t;
    }();
    switch (type) {
        case QuantType::F32: return &f32;
        case QuantType::F16: return &f16;
        case QuantType::Q8_0: return &q8_0;
        case QuantType::Q4_0: return &q4_0;
        default: return nullptr;
    }
}

#undef TESSERA_X86_INT8

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(BlockTraits);

const QuantTraits* simd_block_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(BlockTraits)(type); }
}  // namespace tessera
#endif
