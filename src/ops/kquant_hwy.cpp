// SIMD Q4_K . Q8_K and Q6_K . Q8_K (see kquant_kernels.h), llama.cpp's
// super-block layouts read in place:
//   Q4_K (144 B): fp16 d, fp16 dmin, 12 bytes of 6-bit (scale, min) pairs for
//     8 sub-blocks of 32, then 128 bytes of nibbles (per 64 elements: low
//     nibbles are the first 32, high nibbles the next 32).
//   Q6_K (210 B): ql[128] low 4 bits, qh[64] high 2 bits, int8 scales[16] for
//     sub-blocks of 16, fp16 d.
//   Q8_K (292 B): float d, int8 qs[256], int16 bsums[16] (sums of 16 qs).
// Per super-block the integer part is sum_j scale_j * sum(q * y) over
// sub-block j, by unsigned x signed byte products (maddubs) weighted by the
// scales as 16-bit multipliers (madd); the constant parts (Q4_K's min, Q6_K's
// -32 offset) come from the activation's bsums, so no per-element subtract.
// x86 AVX2 and AVX-512 targets; others use the scalar reference.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kquant_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/kquant_kernels.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define TESSERA_X86_KQUANT 1

constexpr int64_t kQ4KBytes = 144;
constexpr int64_t kQ6KBytes = 210;
constexpr int64_t kQ8KBytes = 292;

HWY_INLINE float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

HWY_INLINE float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

HWY_INLINE __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// sum over 32 bytes of u * s, weighted: lanes of the first 16 bytes by lo,
// of the last 16 by hi (16-bit multipliers), as 8 int32 lanes.
HWY_INLINE __m256i weighted_dot(__m256i u, __m256i s, int16_t lo, int16_t hi) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_madd_epi16(pairs, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}

// llama.cpp's packing of eight 6-bit scales and mins into 12 bytes.
HWY_INLINE void q4_k_scales(const uint8_t* packed, uint8_t* sc, uint8_t* m) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = packed[j] & 63;
        m[j] = packed[j + 4] & 63;
        sc[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0xF) | ((packed[j] >> 6) << 4));
        m[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
    }
}

float q4_k_dot(int64_t n, const void* w, const void* x) {
    const auto* wp = static_cast<const uint8_t*>(w);
    const auto* xp = static_cast<const uint8_t*>(x);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float constant = 0.0f;
    for (int64_t i = 0; i < n / 256; ++i) {
        const uint8_t* wb = wp + i * kQ4KBytes;
        const uint8_t* xb = xp + i * kQ8KBytes;
        float dx;
        std::memcpy(&dx, xb, 4);
        uint8_t sc[8], m[8];
        q4_k_scales(wb + 4, sc, m);
        int16_t bsums[16];
        std::memcpy(bsums, xb + 260, sizeof bsums);
        int32_t min_sum = 0;
        for (int j = 0; j < 8; ++j) min_sum += m[j] * (bsums[2 * j] + bsums[2 * j + 1]);
        constant -= dx * half_at(wb + 2) * static_cast<float>(min_sum);
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < 4; ++g) {
            const __m256i q = load32(wb + 16 + 32 * g);
            const __m256i lo = _mm256_and_si256(q, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            isum = _mm256_add_epi32(isum, weighted_dot(lo, load32(xb + 4 + 64 * g), sc[2 * g], sc[2 * g]));
            isum = _mm256_add_epi32(isum, weighted_dot(hi, load32(xb + 4 + 64 * g + 32), sc[2 * g + 1], sc[2 * g + 1]));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dx * half_at(wb)), acc);
    }
    return hsum(acc) + constant;
}

float q6_k_dot(int64_t n, const void* w, const void* x) {
    const auto* wp = static_cast<const uint8_t*>(w);
    const auto* xp = static_cast<const uint8_t*>(x);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float constant = 0.0f;
    for (int64_t i = 0; i < n / 256; ++i) {
        const uint8_t* wb = wp + i * kQ6KBytes;
        const uint8_t* xb = xp + i * kQ8KBytes;
        float dx;
        std::memcpy(&dx, xb, 4);
        int8_t sc[16];
        std::memcpy(sc, wb + 192, sizeof sc);
        int16_t bsums[16];
        std::memcpy(bsums, xb + 260, sizeof bsums);
        const float d = dx * half_at(wb + 208);
        // value = d * sc * (q - 32): the -32 part is 32 * sum_k sc[k] * bsums[k].
        int32_t offset = 0;
        for (int k = 0; k < 16; ++k) offset += sc[k] * bsums[k];
        constant -= d * 32.0f * static_cast<float>(offset);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = wb + 64 * h;
            const __m256i a = load32(ql), b = load32(ql + 32), bits = load32(wb + 128 + 32 * h);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, low4),
                                               _mm256_slli_epi16(_mm256_and_si256(bits, _mm256_set1_epi8(0x03)), 4));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(b, low4),
                                               _mm256_slli_epi16(_mm256_and_si256(bits, _mm256_set1_epi8(0x0C)), 2));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4),
                                               _mm256_and_si256(bits, _mm256_set1_epi8(0x30)));
            const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4),
                                               _mm256_srli_epi16(_mm256_and_si256(bits, _mm256_set1_epi8(char(0xC0))), 2));
            const uint8_t* y = xb + 4 + 128 * h;
            const int8_t* s = sc + 8 * h;
            isum = _mm256_add_epi32(isum, weighted_dot(q1, load32(y), s[0], s[1]));
            isum = _mm256_add_epi32(isum, weighted_dot(q2, load32(y + 32), s[2], s[3]));
            isum = _mm256_add_epi32(isum, weighted_dot(q3, load32(y + 64), s[4], s[5]));
            isum = _mm256_add_epi32(isum, weighted_dot(q4, load32(y + 96), s[6], s[7]));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
    }
    return hsum(acc) + constant;
}

#endif  // x86 targets

const QuantTraits* KQuantTraits(QuantType type) {
    const QuantTraits* scalar = scalar_traits(type);
    if (scalar == nullptr) return nullptr;
#ifdef TESSERA_X86_KQUANT
    static const QuantTraits q4_k = [&] {
        QuantTraits t = *scalar_traits(QuantType::Q4_K);
        t.vec_dot = q4_k_dot;
        t.vec_dot_tile = vec_dot_tile_by_dots<q4_k_dot>;
        return t;
    }();
    static const QuantTraits q6_k = [&] {
        QuantTraits t = *scalar_traits(QuantType::Q6_K);
        t.vec_dot = q6_k_dot;
        t.vec_dot_tile = vec_dot_tile_by_dots<q6_k_dot>;
        return t;
    }();
    if (type == QuantType::Q4_K) return &q4_k;
    if (type == QuantType::Q6_K) return &q6_k;
#endif
    return nullptr;
}

#undef TESSERA_X86_KQUANT

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(KQuantTraits);

const QuantTraits* simd_kquant_traits(QuantType type) {
    if (type != QuantType::Q4_K && type != QuantType::Q6_K) return nullptr;
    return HWY_DYNAMIC_DISPATCH(KQuantTraits)(type);
}
}  // namespace tessera
#endif
