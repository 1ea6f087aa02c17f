// SIMD Q4_K . Q8_K and Q6_K . Q8_K dot products and the Q8_K activation
// quantizer (see kquants_hwy.h). Blocks are read in place, in llama.cpp's
// layouts (byte offsets below):
//   Q4_K (144 B): fp16 d @0, fp16 dmin @2, 12 bytes of packed 6-bit scales
//     and mins @4, 128 bytes of nibbles @16 (per 64 elements, 32 bytes: low
//     nibbles are the first 32 elements, high nibbles the next 32).
//   Q6_K (210 B): ql[128] @0 (low 4 bits), qh[64] @128 (high 2 bits),
//     int8 scales[16] @192 (one per 16 elements), fp16 d @208.
//   Q8_K (292 B): float d @0, int8 qs[256] @4, int16 bsums[16] @260.
//
// Per super-block the kernels sum code x activation products in integers,
// weighted by the sub-block scales, and apply the float scales once. The
// constant parts of a weight (Q4_K's -dmin * m, Q6_K's -32) never touch the
// elements: they are sub-block scale x activation sum, from Q8_K's bsums.
//
// Highway 1.0.3 has no 8-bit dot product, so the x86 AVX2 and AVX-512
// targets use unsigned x signed byte products (maddubs, codes are the
// unsigned side) summed with 16-bit scale multipliers (madd, or VNNI's
// dpwssd). Other targets (SSE4, NEON) run a portable 128-bit Highway path,
// and the fallback target plain loops.
//
// Tiles: a kernel computes R weight rows x C activation columns at once, each
// weight block unpacked once for C columns. A matrix-vector product (one
// column) runs R rows per call, with the rows two tiles ahead prefetched.

// The targets: x86 SSE4 / AVX2 / AVX3 / AVX3_DL (VNNI), ARM NEON, and the
// fallback (EMU128, or SCALAR where GCC < 12.3 breaks EMU128). SSSE3 adds
// nothing over SSE4 here, and SVE is left to the 128-bit path on NEON.
// tests/ops/test_kquants.cpp sets the same.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#define HWY_WANT_AVX3_DL
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kquants_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "ops/group_tiles.h"
#include "ops/kquant_groups_avx2-inl.h"
#include "ops/kquant_groups_avxvnni-inl.h"
#include "ops/kquant_groups_hwy-inl.h"
#include "ops/kquant_groups_neon_dotprod-inl.h"
#include "ops/kquant_groups_vnni-inl.h"
#include "ops/iq4xs_groups_avx2-inl.h"
#include "ops/iq4xs_groups_hwy-inl.h"
#include "ops/iq4xs_groups_neon_dotprod-inl.h"
#include "ops/iq4xs_groups_vnni-inl.h"
#include "ops/lowbit_groups_avx2-inl.h"
#include "ops/lowbit_groups_hwy-inl.h"
#include "ops/lowbit_groups_neon_dotprod-inl.h"
#include "ops/lowbit_groups_vnni-inl.h"
#include "ops/q5k_groups_avx2-inl.h"
#include "ops/q5k_groups_hwy-inl.h"
#include "ops/q5k_groups_neon_dotprod-inl.h"
#include "ops/q5k_groups_vnni-inl.h"
#include "ops/q6k_groups_avx2-inl.h"
#include "ops/q6k_groups_hwy-inl.h"
#include "ops/q6k_groups_neon_dotprod-inl.h"
#include "ops/q6k_groups_vnni-inl.h"
#include "ops/kquants_hwy.h"
#include "util/fp16.h"

#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#ifndef TESSERA_KQUANTS_HWY_ONCE
#define TESSERA_KQUANTS_HWY_ONCE
namespace tessera::kquants {

constexpr int64_t kBlock = 256;
constexpr int64_t kQ4KBytes = 144;
constexpr int64_t kQ6KBytes = 210;
constexpr int64_t kQ8KBytes = 292;
constexpr int64_t kQ8KQs = 4;      // offset of qs in a Q8_K block
constexpr int64_t kQ8KBsums = 260;  // offset of bsums

// Q4_K's 12 scale bytes unpacked: scales and mins in 6 bits, as bytes. Bytes
// 0-3 hold scales 0-3 and bytes 4-7 mins 0-3 in their low 6 bits; bytes 8-11
// hold the low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high nibble),
// whose top 2 bits are the top 2 bits of bytes 0-3 (scales), 4-7 (mins).
// Done on 32-bit words, four sub-blocks at a time.
struct Q4KScales {
    uint32_t sc_lo, sc_hi, m_lo, m_hi;  // sc0-3, sc4-7, m0-3, m4-7, a byte each
};
inline Q4KScales unpack_q4k_scales(const uint8_t* packed) {
    uint32_t a, b, c;
    std::memcpy(&a, packed, 4);
    std::memcpy(&b, packed + 4, 4);
    std::memcpy(&c, packed + 8, 4);
    return {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
            ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
}

inline float load_f32(const uint8_t* p) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

}  // namespace tessera::kquants
#endif

#include "ops/vnni_target.h"

#if HWY_TARGET == HWY_AVX3_DL
TESSERA_VNNI_PUSH
#endif
HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace kquants;

// ---- Q8_K activation quantizer (portable Highway, every target) ----

// Bytes identical to the scalar reference: the same amax, the first element
// reaching it (with its sign) mapped to -127, the same float products, and
// rounding to nearest even (Round) like the reference's.
void q8_k_from_float_simd(const float* src, void* dst, int64_t n) {
    const hn::CappedTag<float, 16> df;  // 16 divides 256: no remainders
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<int8_t, decltype(di)> d8;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const float* x = src + b * kBlock;
        uint8_t* block = out + b * kQ8KBytes;
        auto vmax = hn::Zero(df);
        for (int64_t i = 0; i < kBlock; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + i)));
        const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
        if (amax == 0.0f) {
            std::memset(block, 0, kQ8KBytes);
            continue;
        }
        float max = amax;
        const auto vamax = hn::Set(df, amax);
        for (int64_t i = 0; i < kBlock; i += N) {
            const intptr_t first = hn::FindFirstTrue(df, hn::Eq(hn::Abs(hn::LoadU(df, x + i)), vamax));
            if (first >= 0) {
                max = x[i + first];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const auto viscale = hn::Set(df, iscale);
        const auto top = hn::Set(di, 127);
        int16_t bsums[16];
        for (int k = 0; k < 16; ++k) {
            auto sum = hn::Zero(di);
            for (int64_t i = 16 * k; i < 16 * k + 16; i += N) {
                const auto q = hn::Min(hn::ConvertTo(di, hn::Round(hn::Mul(hn::LoadU(df, x + i), viscale))), top);
                sum = hn::Add(sum, q);
                hn::StoreU(hn::DemoteTo(d8, q), d8, reinterpret_cast<int8_t*>(block + kQ8KQs + i));
            }
            bsums[k] = static_cast<int16_t>(hn::GetLane(hn::SumOfLanes(di, sum)));
        }
        const float d = 1 / iscale;
        std::memcpy(block, &d, 4);
        std::memcpy(block + kQ8KBsums, bsums, sizeof bsums);
    }
}

// Every cache line of the block of kBytes at p. Tiles fetch the block of the
// rows two tiles ahead this way: R interleaved rows defeat the hardware
// prefetcher, and without it each block would wait for memory (a 4-row
// Q4_K matrix-vector product streamed 4-8 GB/s without prefetch, 18-21 with
// one tile ahead, 22 with two: the machine's plain read speed).
constexpr int64_t kPrefetchTiles = 2;

template <int64_t kBytes>
HWY_INLINE void prefetch_block(const uint8_t* p) {
    for (int64_t offset = 0; offset < kBytes; offset += 64) hwy::Prefetch(p + offset);
    hwy::Prefetch(p + kBytes - 1);
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// ---- x86: shared helpers ----
#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3 selects this target by the AVX512-VNNI CPUID bit but compiles
// it for AVX-VNNI (the VEX form); the 512-bit dpwssd below needs the EVEX one.
TESSERA_VNNI_BEGIN
#endif

HWY_INLINE float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

HWY_INLINE __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// The sum of 8 int32 lanes (exact).
HWY_INLINE int32_t hsum256_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

HWY_INLINE float hsum256(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Q4_K's scales and mins as 16-bit lanes: [sc0 .. sc7, m0 .. m7].
HWY_INLINE __m256i q4k_scales_mins(const uint8_t* packed) {
    const Q4KScales s = unpack_q4k_scales(packed);
    return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(s.m_hi), static_cast<int>(s.m_lo),
                                              static_cast<int>(s.sc_hi), static_cast<int>(s.sc_lo)));
}

// Sums of 32 activations per Q4_K sub-block (bsums in pairs), as 8 x int16.
HWY_INLINE __m128i q8k_pair_sums(const uint8_t* xblock) {
    const __m256i bsums = load256(xblock + kQ8KBsums);
    return _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
}

#endif

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// ---- AVX-512: 64 elements per instruction ----
// 32 registers: 4 x 4 float accumulators, 4 integer ones, operands.
constexpr int kMaxRows = 4;
constexpr int kMaxCols = 4;

// acc + sum of adjacent pairs of pairs * scales (int16 x int16 -> int32).
HWY_INLINE __m512i madd_acc(__m512i acc, __m512i pairs, __m512i scales) {
#if HWY_TARGET == HWY_AVX3_DL
    return _mm512_dpwssd_epi32(acc, pairs, scales);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, scales));
#endif
}

HWY_INLINE __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// A permutexvar index: 16-bit lane i takes lane base + i / span.
HWY_INLINE __m512i spread_index(int base, int span) {
    alignas(64) int16_t idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(base + i / span);
    return _mm512_load_si512(idx);
}

template <int R, int C>
void q4k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    // Group g (64 elements, one 512-bit vector) is sub-block 2g in its low
    // half and 2g + 1 in its high half: scale lanes [sc[2g] x16 | sc[2g+1] x16].
    const __m512i scale_index[4] = {spread_index(0, 16), spread_index(2, 16), spread_index(4, 16),
                                    spread_index(6, 16)};
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const uint8_t* xb[C];
        float dx[C];
        __m128i pair_sums[C];
        for (int c = 0; c < C; ++c) {
            xb[c] = x + c * x_stride + b * kQ8KBytes;
            dx[c] = load_f32(xb[c]);
            pair_sums[c] = q8k_pair_sums(xb[c]);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * w_stride + b * kQ4KBytes;
            prefetch_block<kQ4KBytes>(wb + kPrefetchTiles * R * w_stride);
            const float d = half_at(wb);
            const float dmin = half_at(wb + 2);
            const __m256i scales_mins = q4k_scales_mins(wb + 4);
            const __m512i sm = _mm512_castsi256_si512(scales_mins);
            const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
            __m512i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
            for (int g = 0; g < 4; ++g) {
                const __m256i q = load256(wb + 16 + 32 * g);
                const __m512i codes =
                    _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), low4);
                const __m512i scales = _mm512_permutexvar_epi16(scale_index[g], sm);
                for (int c = 0; c < C; ++c) {
                    const __m512i pairs = _mm512_maddubs_epi16(codes, load512(xb[c] + kQ8KQs + 64 * g));
                    isum[c] = madd_acc(isum[c], pairs, scales);
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m128 min_sum = _mm_cvtepi32_ps(_mm_madd_epi16(mins, pair_sums[c]));
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_set1_ps(d * dx[c]), acc[r][c]);
                acc[r][c] = _mm512_fnmadd_ps(_mm512_zextps128_ps512(min_sum), _mm512_set1_ps(dmin * dx[c]), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int R, int C>
void q6k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    // Per 128 elements, ql's 64 bytes give elements 0-63 (low nibbles) and
    // 64-127 (high nibbles); qh's 32 bytes give their high bits: elements
    // 0-31 bits 0-1, 32-63 bits 2-3, 64-95 bits 4-5, 96-127 bits 6-7. Vector
    // k (64 elements) covers sub-blocks 4k .. 4k + 3, 8 lanes of pairs each.
    const __m512i scale_index[4] = {spread_index(0, 8), spread_index(4, 8), spread_index(8, 8), spread_index(12, 8)};
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    float acc[R][C] = {};
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const uint8_t* xb[C];
        float dx[C];
        __m256i bsums[C];
        for (int c = 0; c < C; ++c) {
            xb[c] = x + c * x_stride + b * kQ8KBytes;
            dx[c] = load_f32(xb[c]);
            bsums[c] = load256(xb[c] + kQ8KBsums);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * w_stride + b * kQ6KBytes;
            prefetch_block<kQ6KBytes>(wb + kPrefetchTiles * R * w_stride);
            const float d = half_at(wb + 208);
            const __m256i s16 = _mm256_cvtepi8_epi16(load128(wb + 192));
            const __m512i s512 = _mm512_castsi256_si512(s16);
            __m512i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
            for (int h = 0; h < 2; ++h) {
                const __m512i low = load512(wb + 64 * h);
                const __m256i high = load256(wb + 128 + 32 * h);
                const __m512i high2 = _mm512_inserti64x4(_mm512_castsi256_si512(high), _mm256_srli_epi16(high, 2), 1);
                const __m512i codes[2] = {
                    _mm512_or_si512(_mm512_and_si512(low, low4), _mm512_and_si512(_mm512_slli_epi16(high2, 4), bits45)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), low4), _mm512_and_si512(high2, bits45))};
                for (int k = 0; k < 2; ++k) {
                    const __m512i scales = _mm512_permutexvar_epi16(scale_index[2 * h + k], s512);
                    for (int c = 0; c < C; ++c) {
                        const __m512i pairs = _mm512_maddubs_epi16(codes[k], load512(xb[c] + kQ8KQs + 128 * h + 64 * k));
                        isum[c] = madd_acc(isum[c], pairs, scales);
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                // The codes are q + 32: subtract 32 * sum_k scale_k * bsum_k.
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(s16, bsums[c]), 5);
                const __m512i total = _mm512_sub_epi32(isum[c], _mm512_zextsi256_si512(offset));
                // The canonical order (row_groups.h): the block's exact integer sum, then one fused step.
                acc[r][c] = std::fma(dx[c], d * static_cast<float>(_mm512_reduce_add_epi32(total)), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c];
}

#elif HWY_TARGET == HWY_AVX2
// ---- AVX2: 32 elements per instruction ----
// 16 registers: 4 x 2 float accumulators, 2 integer ones, operands.
constexpr int kMaxRows = 4;
constexpr int kMaxCols = 2;

// A shuffle_epi8 index repeating 16-bit lane `lo` in the low 128 bits and
// lane `hi` in the high 128 bits (shuffles stay within 128-bit halves).
HWY_INLINE __m256i broadcast_index(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(((2 * hi + 1) << 8) | (2 * hi))),
                            _mm_set1_epi16(static_cast<int16_t>(((2 * lo + 1) << 8) | (2 * lo))));
}

HWY_INLINE __m256i madd_acc(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}

template <int R, int C>
void q4k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const uint8_t* xb[C];
        float dx[C];
        __m128i pair_sums[C];
        for (int c = 0; c < C; ++c) {
            xb[c] = x + c * x_stride + b * kQ8KBytes;
            dx[c] = load_f32(xb[c]);
            pair_sums[c] = q8k_pair_sums(xb[c]);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * w_stride + b * kQ4KBytes;
            prefetch_block<kQ4KBytes>(wb + kPrefetchTiles * R * w_stride);
            const float d = half_at(wb);
            const float dmin = half_at(wb + 2);
            const __m256i scales_mins = q4k_scales_mins(wb + 4);
            const __m256i scales8 = _mm256_permute4x64_epi64(scales_mins, 0x44);  // sc0-7 in both halves
            const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            for (int g = 0; g < 4; ++g) {
                const __m256i q = load256(wb + 16 + 32 * g);
                const __m256i lo = _mm256_and_si256(q, low4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                const __m256i scale_lo = _mm256_shuffle_epi8(scales8, broadcast_index(2 * g, 2 * g));
                const __m256i scale_hi = _mm256_shuffle_epi8(scales8, broadcast_index(2 * g + 1, 2 * g + 1));
                for (int c = 0; c < C; ++c) {
                    const uint8_t* ys = xb[c] + kQ8KQs + 64 * g;
                    isum[c] = madd_acc(isum[c], _mm256_maddubs_epi16(lo, load256(ys)), scale_lo);
                    isum[c] = madd_acc(isum[c], _mm256_maddubs_epi16(hi, load256(ys + 32)), scale_hi);
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m128 min_sum = _mm_cvtepi32_ps(_mm_madd_epi16(mins, pair_sums[c]));
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d * dx[c]), acc[r][c]);
                acc[r][c] = _mm256_fnmadd_ps(_mm256_zextps128_ps256(min_sum), _mm256_set1_ps(dmin * dx[c]), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = hsum256(acc[r][c]);
}

template <int R, int C>
void q6k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float acc[R][C] = {};
    for (int64_t b = 0; b < n / kBlock; ++b) {
        const uint8_t* xb[C];
        float dx[C];
        __m256i bsums[C];
        for (int c = 0; c < C; ++c) {
            xb[c] = x + c * x_stride + b * kQ8KBytes;
            dx[c] = load_f32(xb[c]);
            bsums[c] = load256(xb[c] + kQ8KBsums);
        }
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * w_stride + b * kQ6KBytes;
            prefetch_block<kQ6KBytes>(wb + kPrefetchTiles * R * w_stride);
            const float d = half_at(wb + 208);
            const __m256i s16 = _mm256_cvtepi8_epi16(load128(wb + 192));
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                // Scales 8h .. 8h + 7 in both 128-bit halves.
                const __m256i scales8 = h == 0 ? _mm256_permute4x64_epi64(s16, 0x44) : _mm256_permute4x64_epi64(s16, 0xEE);
                const __m256i a = load256(wb + 64 * h);
                const __m256i bq = load256(wb + 64 * h + 32);
                const __m256i high = load256(wb + 128 + 32 * h);
                // 32 elements each, in order: sub-blocks 2k and 2k + 1 of this half.
                const __m256i codes[4] = {
                    _mm256_or_si256(_mm256_and_si256(a, low4),
                                    _mm256_slli_epi16(_mm256_and_si256(high, _mm256_set1_epi8(0x03)), 4)),
                    _mm256_or_si256(_mm256_and_si256(bq, low4),
                                    _mm256_slli_epi16(_mm256_and_si256(high, _mm256_set1_epi8(0x0C)), 2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                                    _mm256_and_si256(high, _mm256_set1_epi8(0x30))),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bq, 4), low4),
                                    _mm256_srli_epi16(_mm256_and_si256(high, _mm256_set1_epi8(static_cast<char>(0xC0))), 2))};
                for (int k = 0; k < 4; ++k) {
                    const __m256i scales = _mm256_shuffle_epi8(scales8, broadcast_index(2 * k, 2 * k + 1));
                    for (int c = 0; c < C; ++c) {
                        const __m256i pairs = _mm256_maddubs_epi16(codes[k], load256(xb[c] + kQ8KQs + 128 * h + 32 * k));
                        isum[c] = madd_acc(isum[c], pairs, scales);
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(s16, bsums[c]), 5);
                // The canonical order (row_groups.h): the block's exact integer sum, then one fused step.
                const int32_t total = hsum256_epi32(_mm256_sub_epi32(isum[c], offset));
                acc[r][c] = std::fma(dx[c], d * static_cast<float>(total), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c];
}

#else
// ---- Portable (SSE4, NEON): 128-bit Highway vectors; plain loops on the
// one-lane SCALAR target (Highway's fallback where GCC < 12.3 breaks EMU128) ----
// A weight block is first decoded into codes in element order (0..15 or
// 0..63) and one 16-bit scale per 16 elements, once per row; each column
// then takes an integer dot of the codes with its activations.
constexpr int kMaxRows = 4;
constexpr int kMaxCols = 4;

#if HWY_TARGET != HWY_SCALAR
using DU8 = hn::FixedTag<uint8_t, 16>;
using DI8 = hn::FixedTag<int8_t, 16>;
using DI16 = hn::FixedTag<int16_t, 8>;
using DI32 = hn::FixedTag<int32_t, 4>;
#endif

struct DecodedBlock {
    alignas(16) uint8_t codes[kBlock];
    int16_t scales[16];  // per 16 elements
    int16_t mins[8];     // Q4_K: per 32 elements
    float d;
    float dmin;
};

HWY_INLINE void decode_q4k(const uint8_t* wb, DecodedBlock& out) {
#if HWY_TARGET == HWY_SCALAR
    for (int g = 0; g < 4; ++g) {
        for (int l = 0; l < 32; ++l) {
            out.codes[64 * g + l] = wb[16 + 32 * g + l] & 0x0F;
            out.codes[64 * g + 32 + l] = wb[16 + 32 * g + l] >> 4;
        }
    }
#else
    const DU8 du8;
    const auto low4 = hn::Set(du8, 0x0F);
    for (int g = 0; g < 4; ++g) {
        for (int k = 0; k < 2; ++k) {
            const auto q = hn::LoadU(du8, wb + 16 + 32 * g + 16 * k);
            hn::Store(hn::And(q, low4), du8, out.codes + 64 * g + 16 * k);
            hn::Store(hn::ShiftRight<4>(q), du8, out.codes + 64 * g + 32 + 16 * k);
        }
    }
#endif
    const Q4KScales s = unpack_q4k_scales(wb + 4);
    for (int j = 0; j < 4; ++j) {
        const int shift = 8 * j;
        out.scales[2 * j] = out.scales[2 * j + 1] = static_cast<int16_t>((s.sc_lo >> shift) & 0xFF);
        out.scales[8 + 2 * j] = out.scales[8 + 2 * j + 1] = static_cast<int16_t>((s.sc_hi >> shift) & 0xFF);
        out.mins[j] = static_cast<int16_t>((s.m_lo >> shift) & 0xFF);
        out.mins[4 + j] = static_cast<int16_t>((s.m_hi >> shift) & 0xFF);
    }
    out.d = fp16_to_fp32(static_cast<uint16_t>(wb[0] | (wb[1] << 8)));
    out.dmin = fp16_to_fp32(static_cast<uint16_t>(wb[2] | (wb[3] << 8)));
}

HWY_INLINE void decode_q6k(const uint8_t* wb, DecodedBlock& out) {
#if HWY_TARGET == HWY_SCALAR
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = wb + 64 * h;
        const uint8_t* qh = wb + 128 + 32 * h;
        uint8_t* codes = out.codes + 128 * h;
        for (int l = 0; l < 32; ++l) {
            codes[l] = static_cast<uint8_t>((ql[l] & 0x0F) | ((qh[l] & 0x03) << 4));
            codes[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0F) | ((qh[l] & 0x0C) << 2));
            codes[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] & 0x30));
            codes[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh[l] & 0xC0) >> 2));
        }
    }
#else
    const DU8 du8;
    const auto low4 = hn::Set(du8, 0x0F);
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 2; ++k) {
            const auto a = hn::LoadU(du8, wb + 64 * h + 16 * k);
            const auto b = hn::LoadU(du8, wb + 64 * h + 32 + 16 * k);
            const auto high = hn::LoadU(du8, wb + 128 + 32 * h + 16 * k);
            uint8_t* codes = out.codes + 128 * h + 16 * k;
            hn::Store(hn::Or(hn::And(a, low4), hn::ShiftLeft<4>(hn::And(high, hn::Set(du8, 0x03)))), du8, codes);
            hn::Store(hn::Or(hn::And(b, low4), hn::ShiftLeft<2>(hn::And(high, hn::Set(du8, 0x0C)))), du8, codes + 32);
            hn::Store(hn::Or(hn::ShiftRight<4>(a), hn::And(high, hn::Set(du8, 0x30))), du8, codes + 64);
            hn::Store(hn::Or(hn::ShiftRight<4>(b), hn::ShiftRight<2>(hn::And(high, hn::Set(du8, 0xC0)))), du8,
                      codes + 96);
        }
    }
#endif
    for (int k = 0; k < 16; ++k) out.scales[k] = static_cast<int8_t>(wb[192 + k]);
    out.d = fp16_to_fp32(static_cast<uint16_t>(wb[208] | (wb[209] << 8)));
    out.dmin = 0.0f;
}

// sum over 256 elements of codes * activations * the 16-element scale.
HWY_INLINE int32_t scaled_dot(const DecodedBlock& w, const int8_t* y) {
#if HWY_TARGET == HWY_SCALAR
    int32_t sum = 0;
    for (int k = 0; k < 16; ++k) {
        int32_t part = 0;
        for (int l = 0; l < 16; ++l) part += w.codes[16 * k + l] * y[16 * k + l];
        sum += w.scales[k] * part;
    }
    return sum;
#else
    const DU8 du8;
    const DI8 di8;
    const DI16 di16;
    const DI32 di32;
    const hn::Half<DU8> du8h;
    const hn::Half<DI8> di8h;
    auto acc0 = hn::Zero(di32);
    auto acc1 = hn::Zero(di32);
    for (int k = 0; k < 16; ++k) {
        const auto q = hn::Load(du8, w.codes + 16 * k);
        const auto yv = hn::LoadU(di8, y + 16 * k);
        const auto scale = hn::Set(di16, w.scales[k]);
        // Codes x activations fit 16 bits (63 x 128); the scale product is widened.
        const auto lo = hn::Mul(hn::PromoteTo(di16, hn::LowerHalf(du8h, q)), hn::PromoteTo(di16, hn::LowerHalf(di8h, yv)));
        const auto hi = hn::Mul(hn::PromoteTo(di16, hn::UpperHalf(du8h, q)), hn::PromoteTo(di16, hn::UpperHalf(di8h, yv)));
        acc0 = hn::ReorderWidenMulAccumulate(di32, lo, scale, acc0, acc1);
        acc0 = hn::ReorderWidenMulAccumulate(di32, hi, scale, acc0, acc1);
    }
    return hn::GetLane(hn::SumOfLanes(di32, hn::Add(acc0, acc1)));
#endif
}

HWY_INLINE int16_t bsum_at(const uint8_t* xblock, int k) {
    int16_t v;
    std::memcpy(&v, xblock + kQ8KBsums + 2 * k, 2);
    return v;
}

template <bool kQ6, int R, int C>
void portable_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t y_stride) {
    constexpr int64_t wbytes = kQ6 ? kQ6KBytes : kQ4KBytes;
    float acc[R][C] = {};
    DecodedBlock block;
    for (int64_t b = 0; b < n / kBlock; ++b) {
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * w_stride + b * wbytes;
            prefetch_block<wbytes>(wb + kPrefetchTiles * R * w_stride);
            if constexpr (kQ6) {
                decode_q6k(wb, block);
            } else {
                decode_q4k(wb, block);
            }
            for (int c = 0; c < C; ++c) {
                const uint8_t* xb = x + c * x_stride + b * kQ8KBytes;
                const float dx = load_f32(xb);
                const int32_t dot = scaled_dot(block, reinterpret_cast<const int8_t*>(xb + kQ8KQs));
                // The constant part: Q6_K's codes are q + 32, Q4_K subtracts dmin * m.
                int32_t constant = 0;
                if constexpr (kQ6) {
                    for (int k = 0; k < 16; ++k) constant += block.scales[k] * bsum_at(xb, k);
                    // The canonical order (row_groups.h): exact integers, then one fused step.
                    acc[r][c] = std::fma(dx, block.d * static_cast<float>(dot - 32 * constant), acc[r][c]);
                } else {
                    for (int j = 0; j < 8; ++j) constant += block.mins[j] * (bsum_at(xb, 2 * j) + bsum_at(xb, 2 * j + 1));
                    acc[r][c] += dx * (block.d * static_cast<float>(dot) - block.dmin * static_cast<float>(constant));
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c];
}

template <int R, int C>
void q4k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    portable_tile<false, R, C>(n, w, w_stride, x, x_stride, y, y_stride);
}

template <int R, int C>
void q6k_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
              size_t y_stride) {
    portable_tile<true, R, C>(n, w, w_stride, x, x_stride, y, y_stride);
}
#endif

// ---- Tiles of any shape, as register tiles of at most kMaxRows x kMaxCols ----

using TileKernel = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);

template <bool kQ6, int R, int C>
void tile_entry(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                size_t y_stride) {
    if constexpr (kQ6) {
        q6k_tile<R, C>(n, w, w_stride, x, x_stride, y, y_stride);
    } else {
        q4k_tile<R, C>(n, w, w_stride, x, x_stride, y, y_stride);
    }
}

// kernels[(rows - 1) * kMaxCols + cols - 1] computes a rows x cols tile.
template <bool kQ6, int... I>
constexpr std::array<TileKernel, sizeof...(I)> make_tile_kernels(std::integer_sequence<int, I...>) {
    return {&tile_entry<kQ6, I / kMaxCols + 1, I % kMaxCols + 1>...};
}

template <bool kQ6>
void kquant_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                         int n_cols, float* y, size_t y_stride) {
    static constexpr auto kernels = make_tile_kernels<kQ6>(std::make_integer_sequence<int, kMaxRows * kMaxCols>{});
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    for (int r0 = 0; r0 < n_rows; r0 += kMaxRows) {
        const int rows = n_rows - r0 < kMaxRows ? n_rows - r0 : kMaxRows;
        for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
            const int cols = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
            kernels[(rows - 1) * kMaxCols + cols - 1](n, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride,
                                                      y + c0 * y_stride + r0, y_stride);
        }
    }
}

template <bool kQ6>
float kquant_vec_dot(int64_t n, const void* w, const void* x) {
    float y;
    tile_entry<kQ6, 1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &y, 1);
    return y;
}

const QuantTraits* KQuantsTraits(QuantType type) {
    if (scalar_traits(type) == nullptr) return nullptr;
    switch (type) {
        case QuantType::Q4_K: {
            static const QuantTraits q4_k = [] {
                QuantTraits t = *scalar_traits(QuantType::Q4_K);
                t.vec_dot = kquant_vec_dot<false>;
                t.vec_dot_tile = kquant_vec_dot_tile<false>;
                // A grouped kernel on every target, each with the canonical bits.
#if HWY_TARGET == HWY_AVX3_DL
                t.vec_dot_groups = kgroups::q4_k_vec_dot_groups;
#elif HWY_TARGET == HWY_AVX2
                // With AVX-VNNI where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<avxvnni_kgroups::q4_k_vec_dot_groups,
                                                           avx2_kgroups::q4_k_vec_dot_groups>;
#elif HWY_TARGET == HWY_AVX3
                t.vec_dot_groups = avx2_kgroups::q4_k_vec_dot_groups;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
                // With the dot-product extension where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<dotprod_kgroups::q4_k_vec_dot_groups,
                                                           portable_kgroups::q4_k_vec_dot_groups>;
#else
                t.vec_dot_groups = portable_kgroups::q4_k_vec_dot_groups;
#endif
                return t;
            }();
            return &q4_k;
        }
        case QuantType::Q6_K: {
            static const QuantTraits q6_k = [] {
                QuantTraits t = *scalar_traits(QuantType::Q6_K);
                t.vec_dot = kquant_vec_dot<true>;
                t.vec_dot_tile = kquant_vec_dot_tile<true>;
                // Grouped: AVX-512 VNNI's kernel, or portable Highway ops (canonical bits either way).
#if HWY_TARGET == HWY_AVX3_DL
                t.vec_dot_groups = q6k_vnni::q6_k_vec_dot_groups;
#elif HWY_TARGET == HWY_AVX2
                // With AVX-VNNI where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<q6k_avx2::q6_k_vec_dot_groups<avx2_products::AvxVnni>,
                                                           q6k_avx2::q6_k_vec_dot_groups<>>;
#elif HWY_TARGET == HWY_AVX3
                t.vec_dot_groups = q6k_avx2::q6_k_vec_dot_groups<>;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
                // With the dot-product extension where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<dotprod_q6k::q6_k_vec_dot_groups,
                                                           portable_q6k::q6_k_vec_dot_groups>;
#else
                t.vec_dot_groups = portable_q6k::q6_k_vec_dot_groups;
#endif
                return t;
            }();
            return &q6_k;
        }
        case QuantType::Q5_K: {
            static const QuantTraits q5_k = [] {
                // Rows compute with the scalar reference (the same code on every target); grouped rows with
                // AVX-512 VNNI's kernel or portable Highway ops (canonical bits either way).
                QuantTraits t = *scalar_traits(QuantType::Q5_K);
#if HWY_TARGET == HWY_AVX3_DL
                t.vec_dot_groups = q5k_vnni::q5_k_vec_dot_groups;
#elif HWY_TARGET == HWY_AVX2
                // With AVX-VNNI where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<q5k_avx2::q5_k_vec_dot_groups<avx2_products::AvxVnni>,
                                                           q5k_avx2::q5_k_vec_dot_groups<>>;
#elif HWY_TARGET == HWY_AVX3
                t.vec_dot_groups = q5k_avx2::q5_k_vec_dot_groups<>;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
                // With the dot-product extension where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<dotprod_q5k::q5_k_vec_dot_groups,
                                                           portable_q5k::q5_k_vec_dot_groups>;
#else
                t.vec_dot_groups = portable_q5k::q5_k_vec_dot_groups;
#endif
                return t;
            }();
            return &q5_k;
        }
        case QuantType::Q2_K:
        case QuantType::Q3_K: {
            // Rows by the scalar reference; grouped rows by AVX-512 VNNI's kernel or portable Highway ops.
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_LOWBIT_GROUPS(Q3) lowbit_vnni::lowbit_vec_dot_groups<Q3>
#elif HWY_TARGET == HWY_AVX2
            // With AVX-VNNI where the CPU has it and it is allowed.
#define TESSERA_LOWBIT_GROUPS(Q3)                                                               \
    with_int8_dot_extension<lowbit_avx2::lowbit_vec_dot_groups<Q3, avx2_products::AvxVnni>, \
                            lowbit_avx2::lowbit_vec_dot_groups<Q3>>
#elif HWY_TARGET == HWY_AVX3
#define TESSERA_LOWBIT_GROUPS(Q3) lowbit_avx2::lowbit_vec_dot_groups<Q3>
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
            // With the dot-product extension where the CPU has it and it is allowed.
#define TESSERA_LOWBIT_GROUPS(Q3) \
    with_int8_dot_extension<dotprod_lowbit::lowbit_vec_dot_groups<Q3>, portable_lowbit::lowbit_vec_dot_groups<Q3>>
#else
#define TESSERA_LOWBIT_GROUPS(Q3) portable_lowbit::lowbit_vec_dot_groups<Q3>
#endif
            static const QuantTraits q2_k = [] {
                QuantTraits t = *scalar_traits(QuantType::Q2_K);
                t.vec_dot_groups = TESSERA_LOWBIT_GROUPS(false);
                return t;
            }();
            static const QuantTraits q3_k = [] {
                QuantTraits t = *scalar_traits(QuantType::Q3_K);
                t.vec_dot_groups = TESSERA_LOWBIT_GROUPS(true);
                return t;
            }();
#undef TESSERA_LOWBIT_GROUPS
            return type == QuantType::Q2_K ? &q2_k : &q3_k;
        }
        case QuantType::IQ4_XS: {
            static const QuantTraits iq4_xs = [] {
                // Rows compute with the scalar reference; grouped rows with AVX-512 VNNI's kernel or portable
                // Highway ops (canonical bits either way).
                QuantTraits t = *scalar_traits(QuantType::IQ4_XS);
#if HWY_TARGET == HWY_AVX3_DL
                t.vec_dot_groups = iq4xs_vnni::iq4_xs_vec_dot_groups;
#elif HWY_TARGET == HWY_AVX2
                // With AVX-VNNI where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<iq4xs_avx2::iq4_xs_vec_dot_groups<avx2_products::AvxVnni>,
                                                           iq4xs_avx2::iq4_xs_vec_dot_groups<>>;
#elif HWY_TARGET == HWY_AVX3
                t.vec_dot_groups = iq4xs_avx2::iq4_xs_vec_dot_groups<>;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
                // With the dot-product extension where the CPU has it and it is allowed.
                t.vec_dot_groups = with_int8_dot_extension<dotprod_iq4xs::iq4_xs_vec_dot_groups,
                                                           portable_iq4xs::iq4_xs_vec_dot_groups>;
#else
                t.vec_dot_groups = portable_iq4xs::iq4_xs_vec_dot_groups;
#endif
                return t;
            }();
            return &iq4_xs;
        }
        case QuantType::Q8_K: {
            static const QuantTraits q8_k = [] {
                QuantTraits t = *scalar_traits(QuantType::Q8_K);
                t.from_float = q8_k_from_float_simd;
                return t;
            }();
            return &q8_k;
        }
        default: return nullptr;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
TESSERA_VNNI_POP
#endif

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(KQuantsTraits);

const QuantTraits* kquants_simd_traits(QuantType type) {
    if (type != QuantType::Q4_K && type != QuantType::Q5_K && type != QuantType::Q6_K && type != QuantType::Q8_K &&
        type != QuantType::IQ4_XS && type != QuantType::Q2_K && type != QuantType::Q3_K) {
        return nullptr;
    }
    return HWY_DYNAMIC_DISPATCH(KQuantsTraits)(type);
}
}  // namespace tessera
#endif
