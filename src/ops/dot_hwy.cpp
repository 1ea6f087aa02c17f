// SIMD kernels for F32, F16, Q8_0 and Q4_0 weights (see dot_kernels.h),
// compiled once per target by Highway's foreach_target.
//
// Float types and the Q8_0 activation quantizer use portable Highway ops on
// every target. The 8-bit block types need an 8-bit multiply-add that
// Highway 1.0.3 does not wrap: AVX2 / AVX-512 use intrinsics
// (dot_int8_x86-inl.h, and dot_int8_vnni-inl.h for wide tiles with VNNI),
// every other target a portable widening version (dot_int8_hwy-inl.h).
#define HWY_WANT_AVX3_DL  // compile the VNNI target too (Zen 4, Ice Lake and later)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/dot_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "ops/block32_groups_avx2-inl.h"
#include "ops/block32_groups_hwy-inl.h"
#include "ops/block32_groups_neon_dotprod-inl.h"
#include "ops/block32_groups_vnni-inl.h"
#include "ops/canonical_math-inl.h"
#include "ops/group_tiles.h"
#include "ops/dot_int8_groups_avx2-inl.h"
#include "ops/dot_int8_groups_avxvnni-inl.h"
#include "ops/dot_int8_groups_hwy-inl.h"
#include "ops/dot_int8_groups_neon_dotprod-inl.h"
#include "ops/dot_int8_hwy-inl.h"
#include "ops/dot_int8_x86-inl.h"
#include "ops/dot_kernels.h"
#include "ops/block32_scalar.h"
#include "ops/float_canonical.h"
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
// Weight formats of the float kernels: F32, F16, BF16 (the top half of an F32).
enum WeightFormat : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <int kHalf, class D>
HWY_INLINE hn::Vec<D> load_weights(D d, const uint8_t* w, int64_t i) {
    if constexpr (kHalf == kF16) {
        const hn::Rebind<hwy::float16_t, D> dh;
        return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w) + i));
    } else if constexpr (kHalf == kBF16) {
        const hn::RebindToUnsigned<D> du;
        const hn::Rebind<uint16_t, D> d16;
        const auto wide = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(w) + i));
        return hn::BitCast(d, hn::ShiftLeft<16>(wide));
    } else {
        return hn::LoadU(d, reinterpret_cast<const float*>(w) + i);
    }
}

template <int kHalf>
HWY_INLINE float weight_scalar(const uint8_t* w, int64_t i) {
    if constexpr (kHalf == kF16) {
        uint16_t h;
        std::memcpy(&h, w + 2 * i, 2);
        return fp16_to_fp32(h);
    } else if constexpr (kHalf == kBF16) {
        uint16_t h;
        std::memcpy(&h, w + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    } else {
        float f;
        std::memcpy(&f, w + 4 * i, 4);
        return f;
    }
}

HWY_INLINE float activation_scalar(const uint8_t* x, int64_t i) {
    float f;
    std::memcpy(&f, x + 4 * i, 4);
    return f;
}

// Float dot products run in the canonical order of canonical_math-inl.h's
// Lanes16 (16 virtual lanes of fused multiply-adds, then a fixed tree), the
// same bits on every target; attention's scores and F32/F16 weights go
// through them, and the exact modes need those bits not to depend on a
// node's CPU (ops/float_canonical.h is the scalar definition).
#if !HWY_HAVE_SCALABLE
using DC = hn::CappedTag<float, 16>;

// R weight rows x C activation rows, in registers.
template <int kHalf, int R, int C>
void float_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                size_t y_stride) {
    const DC d;
    canonical::Lanes16<DC> acc[R][C];
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int r = 0; r < R; ++r) {
            const uint8_t* wr = w + r * w_stride;
            for (int c = 0; c < C; ++c) {
                const float* xc = reinterpret_cast<const float*>(x + c * x_stride) + i;
                acc[r][c].mul_add([&](size_t o) { return load_weights<kHalf>(d, wr, i + static_cast<int64_t>(o)); },
                                  [&](size_t o) { return hn::LoadU(d, xc + o); });
            }
        }
    }
    if (i < n) {
        // The last elements, zero-padded to 16 (float_canonical.h's definition).
        HWY_ALIGN float w_tail[R][16] = {}, x_tail[C][16] = {};
        for (int64_t j = i; j < n; ++j) {
            for (int r = 0; r < R; ++r) w_tail[r][j - i] = weight_scalar<kHalf>(w + r * w_stride, j);
            for (int c = 0; c < C; ++c) x_tail[c][j - i] = activation_scalar(x + c * x_stride, j);
        }
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) {
                acc[r][c].mul_add([&](size_t o) { return hn::Load(d, w_tail[r] + o); },
                                  [&](size_t o) { return hn::Load(d, x_tail[c] + o); });
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = acc[r][c].reduce();
    }
}

template <int kHalf>
float float_dot(int64_t n, const void* w, const void* x) {
    float y;
    float_tile<kHalf, 1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &y, 1);
    return y;
}
#else
// Scalable vectors cannot be class members: the scalar definition.
template <int kHalf>
float float_dot(int64_t n, const void* w, const void* x) {
    if constexpr (kHalf == kBF16) return bf16_vec_dot(n, w, x);
    return kHalf == kF16 ? f16_dot_canonical(n, w, static_cast<const float*>(x))
                         : f32_dot_canonical(n, static_cast<const float*>(w), static_cast<const float*>(x));
}
#endif  // !HWY_HAVE_SCALABLE

template <int kHalf>
void float_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                        int n_cols, float* y, size_t y_stride) {
#if HWY_HAVE_SCALABLE
    // Scalable vectors cannot be held in arrays: tiles as single dot products.
    vec_dot_tile_by_dots<float_dot<kHalf>>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
#else
    // Register tiles, the edges as smaller instantiations. Each cell is its
    // own chain of fused multiply-adds (16 lanes in a fixed order): a tile is
    // as many independent chains as fit the registers. One column (a token's
    // matrix-vector product) takes more rows at once: 2 rows left AVX-512
    // latency-bound at ~0.7 of the memory's speed (BF16, 1.1B shape).
    using Kernel = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    static constexpr int kRows = 4, kRowsOneColumn = 8;
    static constexpr Kernel kernels[kRows][4] = {
        {float_tile<kHalf, 1, 1>, float_tile<kHalf, 1, 2>, float_tile<kHalf, 1, 3>, float_tile<kHalf, 1, 4>},
        {float_tile<kHalf, 2, 1>, float_tile<kHalf, 2, 2>, float_tile<kHalf, 2, 3>, float_tile<kHalf, 2, 4>},
        {float_tile<kHalf, 3, 1>, float_tile<kHalf, 3, 2>, float_tile<kHalf, 3, 3>, float_tile<kHalf, 3, 4>},
        {float_tile<kHalf, 4, 1>, float_tile<kHalf, 4, 2>, float_tile<kHalf, 4, 3>, float_tile<kHalf, 4, 4>},
    };
    static constexpr Kernel column_kernels[kRowsOneColumn] = {
        float_tile<kHalf, 1, 1>, float_tile<kHalf, 2, 1>, float_tile<kHalf, 3, 1>, float_tile<kHalf, 4, 1>,
        float_tile<kHalf, 5, 1>, float_tile<kHalf, 6, 1>, float_tile<kHalf, 7, 1>, float_tile<kHalf, 8, 1>};
#else
    static constexpr int kRows = 2, kRowsOneColumn = HWY_TARGET == HWY_AVX2 ? 4 : 2;
    static constexpr Kernel kernels[kRows][4] = {
        {float_tile<kHalf, 1, 1>, float_tile<kHalf, 1, 2>, float_tile<kHalf, 1, 3>, float_tile<kHalf, 1, 4>},
        {float_tile<kHalf, 2, 1>, float_tile<kHalf, 2, 2>, float_tile<kHalf, 2, 3>, float_tile<kHalf, 2, 4>},
    };
    static constexpr Kernel column_kernels[4] = {float_tile<kHalf, 1, 1>, float_tile<kHalf, 2, 1>,
                                                 float_tile<kHalf, 3, 1>, float_tile<kHalf, 4, 1>};
#endif
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    if (n_cols == 1) {
        for (int r0 = 0; r0 < n_rows; r0 += kRowsOneColumn) {
            const int rr = n_rows - r0 < kRowsOneColumn ? n_rows - r0 : kRowsOneColumn;
            column_kernels[rr - 1](n, wb + r0 * w_stride, w_stride, xb, x_stride, y + r0, y_stride);
        }
        return;
    }
    for (int r0 = 0; r0 < n_rows; r0 += kRows) {
        const int rr = n_rows - r0 < kRows ? n_rows - r0 : kRows;
        for (int c0 = 0; c0 < n_cols; c0 += 4) {
            const int cc = n_cols - c0 < 4 ? n_cols - c0 : 4;
            kernels[rr - 1][cc - 1](n, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride,
                                    y + c0 * y_stride + r0, y_stride);
        }
    }
#endif
}

void f16_to_float_simd(const void* src, float* dst, int64_t n) {
    const DF d;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto* h = static_cast<const hwy::float16_t*>(src);
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, h + i)), d, dst + i);
    for (; i < n; ++i) dst[i] = weight_scalar<kF16>(static_cast<const uint8_t*>(src), i);
}

// ---- Q8_0 activation quantizer (portable Highway) ----

// Bytes identical to the scalar reference: the same amax, the same float
// division for d and 1/d, and std::round's half-away-from-zero rounding as
// trunc(v + copysign(0.49999997, v)), exact for |v| < 2^23 (here |v| <= 127).
void q8_0_from_float_simd(const float* src, void* dst, int64_t n) {
    const DF d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const hn::RebindToSigned<DF> di;
    // Codes are narrowed in registers and stored a vector at a time: a byte
    // loop over an int32 scratch block made this ~2x slower, and it runs
    // between a token's products, where the other threads wait.
    const hn::Rebind<int8_t, decltype(di)> d8;
    auto* out = static_cast<uint8_t*>(dst);
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
        uint8_t* block = out + b * 34;
        auto* codes = reinterpret_cast<int8_t*>(block + 2);
        i = 0;
        if (N <= 32) {
            for (; i + N <= 32; i += N) {
                const auto v = hn::Mul(hn::LoadU(d, x + i), vinv);
                hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, hn::Trunc(hn::Add(v, hn::CopySign(half, v))))), d8,
                           codes + i);
            }
        }
        for (; i < 32; ++i) codes[i] = static_cast<int8_t>(std::round(x[i] * inv));
        const uint16_t h = fp32_to_fp16(scale);
        std::memcpy(block, &h, 2);
    }
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
namespace int8 = x86;
#else
namespace int8 = portable;
#endif
// The grouped kernels: every target has one, all giving the canonical bits
// (row_groups.h), so a row computes the same on every node of a cluster.
#if HWY_TARGET == HWY_AVX3_DL
namespace groups = vnni;
#elif HWY_TARGET == HWY_AVX2
// AVX2 with AVX-VNNI where the CPU has it and it is allowed.
namespace groups {
template <bool kQ4>
constexpr VecDotGroupsFn int8_vec_dot_groups =
    with_int8_dot_extension<avxvnni_groups::int8_vec_dot_groups<kQ4>, avx2_groups::int8_vec_dot_groups<kQ4>>;
}  // namespace groups
#elif HWY_TARGET == HWY_AVX3
namespace groups = avx2_groups;
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
// NEON with the dot-product extension where the CPU has it and it is allowed.
namespace groups {
template <bool kQ4>
constexpr VecDotGroupsFn int8_vec_dot_groups =
    with_int8_dot_extension<dotprod_groups::int8_vec_dot_groups<kQ4>, portable_groups::int8_vec_dot_groups<kQ4>>;
}  // namespace groups
#else
namespace groups = portable_groups;
#endif

const QuantTraits* BlockTraits(QuantType type) {
    static const QuantTraits f32 = [] {
        QuantTraits t = *scalar_traits(QuantType::F32);
        t.vec_dot = float_dot<kF32>;
        t.vec_dot_tile = float_vec_dot_tile<kF32>;
        return t;
    }();
    static const QuantTraits f16 = [] {
        QuantTraits t = *scalar_traits(QuantType::F16);
        t.to_float = f16_to_float_simd;
        t.vec_dot = float_dot<kF16>;
        t.vec_dot_tile = float_vec_dot_tile<kF16>;
        return t;
    }();
    static const QuantTraits q8_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::Q8_0);
        t.from_float = q8_0_from_float_simd;
        t.vec_dot = int8::q8_0_dot;
        t.vec_dot_tile = int8::int8_vec_dot_tile<false>;
        t.vec_dot_groups = groups::int8_vec_dot_groups<false>;
        return t;
    }();
    static const QuantTraits q4_0 = [] {
        QuantTraits t = *scalar_traits(QuantType::Q4_0);
        t.vec_dot = int8::q4_0_dot;
        t.vec_dot_tile = int8::int8_vec_dot_tile<true>;
        t.vec_dot_groups = groups::int8_vec_dot_groups<true>;
        return t;
    }();
    static const QuantTraits bf16 = [] {
        QuantTraits t = *scalar_traits(QuantType::BF16);
        t.vec_dot = float_dot<kBF16>;
        t.vec_dot_tile = float_vec_dot_tile<kBF16>;
        return t;
    }();
    // The other 32-element types: rows by the scalar reference (the same code
    // on every target), grouped rows by AVX-512 VNNI's kernel or portable
    // Highway ops (canonical bits either way).
#if HWY_TARGET == HWY_AVX3_DL
#define TESSERA_BLOCK32_GROUPS(T) block32_vnni::block32_vec_dot_groups<T>
#elif HWY_TARGET == HWY_AVX2
    // With AVX-VNNI where the CPU has it and it is allowed.
#define TESSERA_BLOCK32_GROUPS(T)                                                                 \
    with_int8_dot_extension<block32_avx2::block32_vec_dot_groups<T, avx2_products::AvxVnni>, \
                            block32_avx2::block32_vec_dot_groups<T>>
#elif HWY_TARGET == HWY_AVX3
#define TESSERA_BLOCK32_GROUPS(T) block32_avx2::block32_vec_dot_groups<T>
#elif HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
    // With the dot-product extension where the CPU has it and it is allowed.
#define TESSERA_BLOCK32_GROUPS(T) \
    with_int8_dot_extension<dotprod_block32::block32_vec_dot_groups<T>, portable_block32::block32_vec_dot_groups<T>>
#else
#define TESSERA_BLOCK32_GROUPS(T) portable_block32::block32_vec_dot_groups<T>
#endif
    static const auto block32 = [](QuantType t) {
        QuantTraits traits = *scalar_traits(t);
        switch (t) {
            case QuantType::Q5_0: traits.vec_dot_groups = TESSERA_BLOCK32_GROUPS(QuantType::Q5_0); break;
            case QuantType::Q5_1: traits.vec_dot_groups = TESSERA_BLOCK32_GROUPS(QuantType::Q5_1); break;
            case QuantType::Q4_1: traits.vec_dot_groups = TESSERA_BLOCK32_GROUPS(QuantType::Q4_1); break;
            case QuantType::IQ4_NL: traits.vec_dot_groups = TESSERA_BLOCK32_GROUPS(QuantType::IQ4_NL); break;
            default: traits.vec_dot_groups = TESSERA_BLOCK32_GROUPS(QuantType::MXFP4); break;
        }
        return traits;
    };
#undef TESSERA_BLOCK32_GROUPS
    static const QuantTraits q4_1 = block32(QuantType::Q4_1);
    static const QuantTraits q5_0 = block32(QuantType::Q5_0), q5_1 = block32(QuantType::Q5_1),
                             iq4_nl = block32(QuantType::IQ4_NL), mxfp4 = block32(QuantType::MXFP4);
    switch (type) {
        case QuantType::Q5_0: return &q5_0;
        case QuantType::Q5_1: return &q5_1;
        case QuantType::Q4_1: return &q4_1;
        case QuantType::IQ4_NL: return &iq4_nl;
        case QuantType::MXFP4: return &mxfp4;
        case QuantType::F32: return &f32;
        case QuantType::BF16: return &bf16;
        case QuantType::F16: return &f16;
        case QuantType::Q8_0: return &q8_0;
        case QuantType::Q4_0: return &q4_0;
        default: return nullptr;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tessera {
HWY_EXPORT(BlockTraits);

const QuantTraits* simd_block_traits(QuantType type) { return HWY_DYNAMIC_DISPATCH(BlockTraits)(type); }

std::vector<int64_t> simd_block_targets() {
    // HWY_TARGETS of this file (with AVX3_DL), not of the caller's.
    std::vector<int64_t> targets;
    for (int64_t bits = hwy::SupportedTargets() & HWY_TARGETS; bits != 0; bits &= bits - 1) {
        targets.push_back(bits & -bits);
    }
    return targets;
}
}  // namespace tessera
#endif
