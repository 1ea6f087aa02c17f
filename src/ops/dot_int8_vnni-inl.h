// Q8_0 and Q4_0 tiles of 16 weight rows x many columns with AVX-512 VNNI
// (target AVX3_DL), for matrix-matrix products (prefill). Included by
// dot_int8_x86-inl.h once per target (hence the toggling include guard).
//
// The register tiles of dot_int8_x86-inl.h hold one cell per vector (partial
// sums of one row x one column in 16 lanes), so every cell costs an int->float
// conversion, a scale product and an FMA per block pair besides its dpbusd.
// Here a vector holds one column's results for 16 rows, one row per int32
// lane: the 16 rows' weights are repacked once per call so that chunk k of a
// block (weights 4k..4k+3) of row r sits in lane r, and each dpbusd multiplies
// them by the column's 4 activation bytes 4k..4k+3 broadcast from memory. A
// block of 16 cells then takes 8 dpbusd and one conversion, scale product and
// FMA for all 16.
//
// dpbusd multiplies unsigned by signed bytes: the activations are made
// unsigned (y + 128, copied once per call) and the weights stay signed (Q4_0
// as q - 8), so the offset's share, -128 * sum(w) per row and block, depends
// on the weights only and is computed when they are repacked; it seeds each
// block's integer sum.

#if defined(TESSERA_OPS_DOT_INT8_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_DOT_INT8_VNNI_INL_H_
#undef TESSERA_OPS_DOT_INT8_VNNI_INL_H_
#else
#define TESSERA_OPS_DOT_INT8_VNNI_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include "ops/group_tiles.h"
#include "ops/register_pin.h"
#include "ops/row_groups.h"
#include <vector>

#include "ops/vnni_target.h"

TESSERA_VNNI_PUSH
HWY_BEFORE_NAMESPACE();
// See dot_int8_x86-inl.h: Highway 1.0.3 compiles this target for AVX-VNNI,
// the CPUs it selects it on have AVX512-VNNI.
TESSERA_VNNI_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace vnni {

// Rows per vector (one per int32 lane) and columns per register group.
constexpr int kRows = 16;
constexpr int kMaxCols = 8;
// Below this many columns the repacking costs more than it saves (measured
// with benchmarks/kernel_bench --tile 16 C; Q4_0's unpacking in the register
// tiles is cheaper than Q8_0's sign handling, so it gains later).
template <bool kQ4>
constexpr int kMinCols = kQ4 ? 16 : 8;

// One block of 16 rows: w[k] lane r = row r's signed weights 4k..4k+3.
struct PackedBlock {
    __m512i w[8];
    __m512i seed;  // -128 * the sum of each row's weights
    __m512 d;      // the rows' scales
};

// Lane r of out[k] (k < 4) = dword k of the 16 bytes at p + r * stride.
HWY_INLINE void transpose_16x4(const uint8_t* p, size_t stride, __m512i out[4]) {
    // Dword k of each 128-bit lane to lane k: a 4 x 4 transpose in place.
    const __m512i lanes_to_dwords = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i z[4];
    for (int j = 0; j < 4; ++j) {
        const uint8_t* r = p + 4 * j * stride;
        __m512i t = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
        t = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + stride)), 1);
        t = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * stride)), 2);
        t = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 3 * stride)), 3);
        // Lane k of z[j]: dword k of rows 4j .. 4j + 3.
        z[j] = _mm512_permutexvar_epi32(lanes_to_dwords, t);
    }
    // out[k] = lane k of z[0], z[1], z[2], z[3]: a 4 x 4 transpose of lanes.
    const __m512i t0 = _mm512_shuffle_i32x4(z[0], z[1], 0x44), t1 = _mm512_shuffle_i32x4(z[0], z[1], 0xEE);
    const __m512i t2 = _mm512_shuffle_i32x4(z[2], z[3], 0x44), t3 = _mm512_shuffle_i32x4(z[2], z[3], 0xEE);
    out[0] = _mm512_shuffle_i32x4(t0, t2, 0x88);
    out[1] = _mm512_shuffle_i32x4(t0, t2, 0xDD);
    out[2] = _mm512_shuffle_i32x4(t1, t3, 0x88);
    out[3] = _mm512_shuffle_i32x4(t1, t3, 0xDD);
}

// Repacks rows [0, 16) of a weight tile, all nb blocks.
template <bool kQ4>
HWY_INLINE void pack_rows(const uint8_t* w, size_t w_stride, int64_t nb, PackedBlock* out) {
    constexpr int64_t wbytes = kQ4 ? 18 : 34;
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(static_cast<int>(w_stride)));
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* base = w + b * wbytes;
        PackedBlock& p = out[b];
        // The scale's 2 bytes and the first 2 weight bytes; keep the scale.
        const __m512i h = _mm512_i32gather_epi32(rows, base, 1);
        p.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
        if constexpr (kQ4) {
            // Bytes 4k..4k+3: low nibbles are weights 4k.., high ones 16 + 4k..
            __m512i q[4];
            transpose_16x4(base + 2, w_stride, q);
            const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
            for (int k = 0; k < 4; ++k) {
                p.w[k] = _mm512_sub_epi8(_mm512_and_si512(q[k], low), eight);
                p.w[k + 4] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi32(q[k], 4), low), eight);
            }
        } else {
            transpose_16x4(base + 2, w_stride, p.w);
            transpose_16x4(base + 18, w_stride, p.w + 4);
        }
        __m512i sum = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) sum = _mm512_dpbusd_epi32(sum, ones, p.w[k]);
        p.seed = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
    }
}

// One activation row: its values + 128 as unsigned bytes, 32 per block, and
// its scales (16 blocks' at a time by a gather where 16 remain).
HWY_INLINE void prepare_column(const uint8_t* x, int64_t nb, uint8_t* y_biased, float* d) {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int64_t b = 0; b < nb; ++b) {
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + b * 34 + 2));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y_biased + b * 32), _mm256_xor_si256(y, bias));
    }
    for (int64_t b = 0; b < nb; ++b) {
        uint16_t h;
        std::memcpy(&h, x + b * 34, 2);
        d[b] = _cvtsh_ss(h);
    }
}

// 16 rows x C columns over all blocks; y[c * y_stride + r].
template <int C>
void row_lane_kernel(int64_t nb, const PackedBlock* pw, const uint8_t* ya, const float* dx, float* y,
                     size_t y_stride) {
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const PackedBlock& p = pw[b];
        __m512i s[C];
        for (int c = 0; c < C; ++c) s[c] = p.seed;
        for (int k = 0; k < 8; ++k) {
            const __m512i wk = _mm512_load_si512(&p.w[k]);
            for (int c = 0; c < C; ++c) {
                int32_t y4;
                std::memcpy(&y4, ya + (c * nb + b) * 32 + 4 * k, 4);
                s[c] = _mm512_dpbusd_epi32(s[c], _mm512_set1_epi32(y4), wk);
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m512 scale = _mm512_mul_ps(p.d, _mm512_set1_ps(dx[c * nb + b]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), scale, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
}

// n_rows a multiple of 16, any n_cols.
template <bool kQ4>
void row_lane_tile(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* x, size_t x_stride,
                   int n_cols, float* y, size_t y_stride) {
    const int64_t nb = n / 32;
    // Per thread, grown to the largest tile seen (the packed blocks aligned
    // by hand: std::allocator may not honour a 64-byte alignment).
    thread_local std::vector<uint8_t> packed_bytes;
    thread_local std::vector<uint8_t> y_biased;
    thread_local std::vector<float> dx;
    if (packed_bytes.size() < nb * sizeof(PackedBlock) + 64) packed_bytes.resize(nb * sizeof(PackedBlock) + 64);
    const uintptr_t address = reinterpret_cast<uintptr_t>(packed_bytes.data());
    auto* packed = reinterpret_cast<PackedBlock*>(packed_bytes.data() + ((64 - address % 64) % 64));
    if (dx.size() < static_cast<size_t>(nb * n_cols)) {
        y_biased.resize(nb * n_cols * 32);
        dx.resize(nb * n_cols);
    }
    for (int c = 0; c < n_cols; ++c) {
        prepare_column(x + c * x_stride, nb, y_biased.data() + c * nb * 32, dx.data() + c * nb);
    }
    using Kernel = void (*)(int64_t, const PackedBlock*, const uint8_t*, const float*, float*, size_t);
    static constexpr Kernel kernels[kMaxCols] = {row_lane_kernel<1>, row_lane_kernel<2>, row_lane_kernel<3>,
                                                 row_lane_kernel<4>, row_lane_kernel<5>, row_lane_kernel<6>,
                                                 row_lane_kernel<7>, row_lane_kernel<8>};
    for (int r0 = 0; r0 < n_rows; r0 += kRows) {
        pack_rows<kQ4>(w + r0 * w_stride, w_stride, nb, packed);
        for (int c0 = 0; c0 < n_cols; c0 += kMaxCols) {
            const int cc = n_cols - c0 < kMaxCols ? n_cols - c0 : kMaxCols;
            kernels[cc - 1](nb, packed, y_biased.data() + c0 * nb * 32, dx.data() + c0 * nb, y + c0 * y_stride + r0,
                            y_stride);
        }
    }
}

// ---- Q4_0 and Q8_0 in the group layout (ops/row_groups.h) ----
// Block b of a group holds its 16 rows' codes in chunks of 4 bytes per 32-bit
// lane: Q4_0 in 4 chunks of packed bytes (one load and two masks give 2 x 4
// codes of every row; the high nibbles are left in place, 16 x their value,
// summed apart and shifted down once per block: one instruction less per
// chunk than shifting each, ~1.2x the in-cache speed), Q8_0 in 8 chunks of
// codes stored + 128. dpbusd
// multiplies them (unsigned) by 4 of the column's activation bytes (signed)
// broadcast to every lane. The codes' offset (8, or 128) costs -offset *
// sum(y) per block, the same for all rows: it seeds the block's integer sum.
// Each lane accumulates its row's blocks in order, so a row's result does not
// depend on the group it is in or on how many columns run at once.
constexpr int kMaxGroupCols = 8;

// 16 rows x C columns over all nb blocks of one group, in units of unit_nb
// blocks; y[u * unit_stride + c * y_stride + r].
template <bool kQ4, int C>
void int8_group_kernel(int64_t nb, int64_t unit_nb, const uint8_t* g, const uint8_t* x, size_t x_stride,
                       const int32_t* sums, size_t sums_stride, float* y, size_t y_stride, size_t unit_stride,
                       bool accumulate) {
    constexpr int64_t kGroupBlockBytes = kQ4 ? 288 : 544, kScaleBytes = 32, kActBlockBytes = 34;
    constexpr int32_t kOffset = kQ4 ? 8 : 128;
    const __m512i low = _mm512_set1_epi8(0x0F);
    const Ahead near = near_prefetch(kQ4 ? QuantType::Q4_0 : QuantType::Q8_0);
    for (int64_t u0 = 0; u0 < nb; u0 += unit_nb, y += unit_stride) {
        const int64_t u1 = u0 + unit_nb < nb ? u0 + unit_nb : nb;
        __m512 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = accumulate ? _mm512_loadu_ps(y + c * y_stride) : _mm512_setzero_ps();
        for (int64_t b = u0; b < u1; ++b) {
            const uint8_t* p = g + b * kGroupBlockBytes;
            prefetch_ahead(p, kGroupBlockBytes, near);
            // w[j] lane r: row r's codes 4j..4j+3 (Q4_0: 16 + 4(j-4).. for j >= 4).
            __m512i w[8];
            if constexpr (kQ4) {
                for (int k = 0; k < 4; ++k) {
                    __m512i q = _mm512_loadu_si512(p + kScaleBytes + 64 * k);
                    TESSERA_PIN_REGISTER(q);  // one load for both nibbles (ops/register_pin.h)
                    w[k] = _mm512_and_si512(q, low);
                    w[k + 4] = _mm512_andnot_si512(low, q);  // 16 x the high nibble
                }
            } else {
                for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(p + kScaleBytes + 64 * k);
            }
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
            for (int c = 0; c < C; ++c) {
                const uint8_t* xb = x + c * x_stride + b * kActBlockBytes;
                __m512i s = _mm512_set1_epi32(-kOffset * sums[c * sums_stride + b]);
                if constexpr (kQ4) {
                    // High nibbles stay in place (x16) and are summed apart; the
                    // sum is a multiple of 16, so the shift divides exactly.
                    __m512i hi = _mm512_setzero_si512();
                    for (int j = 0; j < 4; ++j) {
                        int32_t y4[2];
                        std::memcpy(&y4[0], xb + 2 + 4 * j, 4);
                        std::memcpy(&y4[1], xb + 2 + 16 + 4 * j, 4);
                        s = _mm512_dpbusd_epi32(s, w[j], _mm512_set1_epi32(y4[0]));
                        hi = _mm512_dpbusd_epi32(hi, w[j + 4], _mm512_set1_epi32(y4[1]));
                    }
                    s = _mm512_add_epi32(s, _mm512_srai_epi32(hi, 4));
                } else {
                    // Two chains of dependent dpbusd, not one: a block's sum is
                    // ready sooner after its bytes arrive from memory.
                    __m512i s1 = _mm512_setzero_si512();
                    for (int j = 0; j < 8; j += 2) {
                        int32_t y4[2];
                        std::memcpy(y4, xb + 2 + 4 * j, 8);
                        s = _mm512_dpbusd_epi32(s, w[j], _mm512_set1_epi32(y4[0]));
                        s1 = _mm512_dpbusd_epi32(s1, w[j + 1], _mm512_set1_epi32(y4[1]));
                    }
                    s = _mm512_add_epi32(s, s1);
                }
                uint16_t h;
                std::memcpy(&h, xb, 2);
                const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(h)));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * y_stride, acc[c]);
    }
}

// QuantTraits::vec_dot_groups for Q4_0 (kQ4) and Q8_0.
template <bool kQ4>
void int8_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                         size_t x_stride, const int32_t* x_sums, size_t sums_stride, int n_cols, float* y,
                         size_t y_stride, int64_t unit_n, size_t unit_stride, bool accumulate) {
    static constexpr Int8GroupKernel kernels[kMaxGroupCols] = {
        int8_group_kernel<kQ4, 1>, int8_group_kernel<kQ4, 2>, int8_group_kernel<kQ4, 3>, int8_group_kernel<kQ4, 4>,
        int8_group_kernel<kQ4, 5>, int8_group_kernel<kQ4, 6>, int8_group_kernel<kQ4, 7>, int8_group_kernel<kQ4, 8>};
    run_int8_group_tiles(kernels, n, w, group_stride, n_groups, x, x_stride, x_sums, sums_stride, n_cols, y,
                         y_stride, unit_n, unit_stride, accumulate);
}

}  // namespace vnni
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_VNNI_POP

#endif  // HWY_TARGET == HWY_AVX3_DL
#endif  // include guard
