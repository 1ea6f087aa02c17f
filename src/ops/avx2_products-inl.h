// How the 256-bit grouped kernels form their int8 products: unsigned weight
// bytes times signed activation bytes, 4 products per 32-bit lane.
// - Maddubs (AVX2): maddubs adds the products in pairs into int16 (a caller
//   keeps a pair sum below 2^15 and widens in time), madd with ones widens.
// - AvxVnni (AVX2 on a CPU with AVX-VNNI, ops/int8_dot_extension.h): one
//   vpdpbusd adds the 4 products straight into the int32 lane (and vpdpwssd
//   adds int16 pair products into int32 as madd and an add would).
// Both give the same exact integers, so a kernel written once for either
// (a template on the policy) gives the same bits with both.
//
// The VNNI instructions are written as asm in its VEX form: a template's instantiations
// share its function's target attributes, and the AVX2 target must not be
// compiled for AVX-VNNI as a whole (its other code would then be free to use
// it on CPUs without it). Callers pick AvxVnni only where
// int8_dot_extension_enabled(). Included once per target (hence the
// toggling include guard), outside any namespace.

#if defined(TESSERA_OPS_AVX2_PRODUCTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_AVX2_PRODUCTS_INL_H_
#undef TESSERA_OPS_AVX2_PRODUCTS_INL_H_
#else
#define TESSERA_OPS_AVX2_PRODUCTS_INL_H_
#endif

#include <hwy/highway.h>

// (AVX3_DL too: its IQ1 kernel is the 256-bit one, iq_grid_groups_avx2-inl.h.)
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace avx2_products {

// 8 rows' scale bytes (one a row) as each row's 32-bit lane holding its
// byte twice, as int16: the factor a vpmaddwd applies to both int16 pair
// sums of a lane, widening and scaling at once (the 8 bytes broadcast to
// both 128-bit halves; 0x80 in the shuffle zeroes each int16's high byte).
HWY_INLINE __m256i scale_pairs(const uint8_t* bytes) {
    alignas(32) static constexpr int8_t kShuffle[32] = {
        0, -128, 0, -128, 1, -128, 1, -128, 2, -128, 2, -128, 3, -128, 3, -128,
        4, -128, 4, -128, 5, -128, 5, -128, 6, -128, 6, -128, 7, -128, 7, -128};
    int64_t eight;
    std::memcpy(&eight, bytes, 8);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(eight), _mm256_load_si256(reinterpret_cast<const __m256i*>(kShuffle)));
}

// s + v in int16 / int32 lanes, added into s's own register. As asm: with
// the add an intrinsic, GCC reassociates a kernel's unrolled chain of adds
// into a tree whose leaves (every product of a chunk) outlive the 16
// registers and go through the stack, or adds into a new register and copies
// it back each step.
HWY_INLINE __m256i accumulate16(__m256i s, __m256i v) {
    asm("vpaddw %1, %0, %0" : "+x"(s) : "x"(v));
    return s;
}
HWY_INLINE __m256i accumulate32(__m256i s, __m256i v) {
    asm("vpaddd %1, %0, %0" : "+x"(s) : "x"(v));
    return s;
}

// For kernels whose registers hold only their integer sums, the float sums
// run in y (16 rows a column, y_stride apart): cleared for a unit's first
// block (where the sums do not accumulate onto y), then each block's added
// as acc = fma(float(s), scale, acc), the canonical step, as in registers.
HWY_INLINE void clear_sums(float* y, size_t y_stride, int n_cols) {
    for (int c = 0; c < n_cols; ++c) {
        _mm256_storeu_ps(y + c * y_stride, _mm256_setzero_ps());
        _mm256_storeu_ps(y + c * y_stride + 8, _mm256_setzero_ps());
    }
}
HWY_INLINE void add_block_sums(float* y8, __m256i s, __m256 scale) {
    _mm256_storeu_ps(y8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, _mm256_loadu_ps(y8)));
}

struct Maddubs {
    // s (int16 pair sums) plus w's bytes times y's, pairwise.
    static HWY_INLINE __m256i add(__m256i s, __m256i w, __m256i y) {
        return accumulate16(s, _mm256_maddubs_epi16(w, y));
    }
    // add's sums as int32 lanes (4 products each).
    static HWY_INLINE __m256i widen(__m256i s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
    // s (int32 lanes) plus the 4 products of each lane.
    static HWY_INLINE __m256i add32(__m256i s, __m256i w, __m256i y) {
        return _mm256_add_epi32(s, widen(_mm256_maddubs_epi16(w, y)));
    }
    // The 4 products of each lane alone: for sums whose every term would
    // otherwise wait on the one before (vpdpbusd's latency, AvxVnni).
    static HWY_INLINE __m256i dot4(__m256i w, __m256i y) { return widen(_mm256_maddubs_epi16(w, y)); }
    // s (int32 lanes) plus a's int16 pairs times b's, each lane's pair added.
    static HWY_INLINE __m256i add_pairs(__m256i s, __m256i a, __m256i b) {
        return _mm256_add_epi32(s, _mm256_madd_epi16(a, b));
    }
};

#if HWY_TARGET == HWY_AVX2
struct AvxVnni {
    static HWY_INLINE __m256i add32(__m256i s, __m256i w, __m256i y) {
        asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(s) : "x"(w), "x"(y));
        return s;
    }
    static HWY_INLINE __m256i dot4(__m256i w, __m256i y) { return add32(_mm256_setzero_si256(), w, y); }
    // vpdpwssd: madd and the add in one.
    static HWY_INLINE __m256i add_pairs(__m256i s, __m256i a, __m256i b) {
        asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(s) : "x"(a), "x"(b));
        return s;
    }
    // Already int32: add is add32, widen the identity.
    static HWY_INLINE __m256i add(__m256i s, __m256i w, __m256i y) { return add32(s, w, y); }
    static HWY_INLINE __m256i widen(__m256i s) { return s; }
};
#endif

}  // namespace avx2_products
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
