// BF16 weights against BF16 activations in the canonical order of
// float_canonical.h's bf16_pairs_dot_canonical, which is vdpbf16ps's own:
// - AVX3_DL on a CPU with AVX-512 BF16 (Zen 4 and 5, Sapphire Rapids): the
//   instruction, 32 products an instruction (twice an F32 FMA's), which is
//   what makes BF16 prefill compute-bound at llama.cpp's speed or better;
// - every other target: fused multiply-adds on the pairs' halves (a 32-bit
//   word of two BF16 values holds the odd element in its high half, already
//   an F32, and the even one below it, an F32 after a shift), with the
//   instruction's flushing of denormal inputs and results done by the
//   hardware's flush mode on x86 and 64-bit ARM (MXCSR's DAZ and FTZ,
//   FPCR's FZ) and by explicit selects where the target has no fused
//   multiply-add of its own.
// Either way each of a cell's 16 canonical lanes takes the same steps, so a
// BF16 file gives the same bits on every CPU. Included by dot_hwy.cpp once
// per target (hence the toggling include guard).

#if defined(TESSERA_OPS_BF16_PAIRS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_OPS_BF16_PAIRS_INL_H_
#undef TESSERA_OPS_BF16_PAIRS_INL_H_
#else
#define TESSERA_OPS_BF16_PAIRS_INL_H_
#endif

#include <hwy/highway.h>

#include "ops/block32_scalar.h"
#include "ops/canonical_math-inl.h"
#include "ops/float_canonical.h"
#include "ops/group_prefetch.h"
#include "ops/quant_traits.h"
#include "ops/row_groups.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace tessera {
namespace HWY_NAMESPACE {
namespace bf16_pairs {
namespace hn = hwy::HWY_NAMESPACE;

// GCC 12 at -O3 keeps an array of vector accumulators in memory as well as
// in registers, storing every one at each step of the loop (a 4 x 6 tile of
// vdpbf16ps ran at 0.6 of the instruction's rate), unless the loops over the
// tile's rows and columns are unrolled early: hence the unroll pragmas
// (which Clang reads too).
#define TESSERA_UNROLL _Pragma("GCC unroll 8")

// The hardware flushes denormal inputs and results for its scope where the
// target's multiply-add is one instruction; elsewhere the kernel selects.
#if HWY_NATIVE_FMA && (HWY_ARCH_X86 || HWY_ARCH_ARM_A64)
constexpr bool kHardwareFlush = true;
class FlushDenormals {
public:
#if HWY_ARCH_X86
    FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ | DAZ
    ~FlushDenormals() { _mm_setcsr(saved_); }

private:
    unsigned saved_;
#else
    FlushDenormals() {
        asm volatile("mrs %0, fpcr" : "=r"(saved_) : : "memory");
        const uint64_t fz = saved_ | (uint64_t{1} << 24);
        asm volatile("msr fpcr, %0" : : "r"(fz) : "memory");
    }
    ~FlushDenormals() { asm volatile("msr fpcr, %0" : : "r"(saved_) : "memory"); }

private:
    uint64_t saved_;
#endif
};
#else
constexpr bool kHardwareFlush = false;
struct FlushDenormals {};
#endif

// The flush mode is a register the compilers do not see the products
// depend on: Clang moved them past the restoring of MXCSR (results came out
// denormal). Each accumulator passes through an empty asm after the mode is
// set and before it is restored, ordered with those writes (all are volatile
// and touch memory), so every product in between runs under the mode.
template <class V>
HWY_INLINE void pin(V& v) {
    if constexpr (kHardwareFlush) {
#if HWY_ARCH_X86
        asm volatile("" : "+v"(v.raw) : : "memory");
#elif HWY_ARCH_ARM_A64
        asm volatile("" : "+w"(v.raw) : : "memory");
#endif
    }
}

// One column (a token's product) streams its R rows at once, R streams of
// memory, and a hardware prefetcher restarts at each 4 KiB page of each
// (ops/group_prefetch.h): the kernel asks for every row's lines ahead itself,
// the policy's distance shared among the rows (as dot_hwy.cpp's float
// tiles). A hint: no bits change. `i`: the chunk's first element.
template <int R>
HWY_INLINE void prefetch_rows(const uint8_t* w, size_t w_stride, int64_t i, Ahead near) {
    if (near == Ahead::kNone) return;
    const int64_t far_ahead = far_prefetch_bytes(near) / R, near_ahead = kL1PolicyNearBytes / R;
    for (int r = 0; r < R; ++r) {
        const uint8_t* line = w + r * w_stride + 2 * i;
        __builtin_prefetch(line + far_ahead, 0, 2);
        if (near == Ahead::kL2AndL1) __builtin_prefetch(line + near_ahead, 0, 3);
    }
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
using DC = hn::CappedTag<float, 16>;
using DU = hn::RebindToUnsigned<DC>;

// v, or a zero of its sign where |v| is below the smallest normal float.
HWY_INLINE hn::Vec<DC> flush(DC d, hn::Vec<DC> v) {
    const auto tiny = hn::Lt(hn::Abs(v), hn::Set(d, std::numeric_limits<float>::min()));
    return hn::IfThenElse(tiny, hn::And(v, hn::SignBit(d)), v);
}

// lane = step(a, b, lane) of float_canonical.h.
HWY_INLINE hn::Vec<DC> step(DC d, hn::Vec<DC> a, hn::Vec<DC> b, hn::Vec<DC> lane) {
    if constexpr (kHardwareFlush) return hn::MulAdd(a, b, lane);
    return flush(d, canonical::fused_mul_add(d, flush(d, a), flush(d, b), lane));
}

// N words (pairs) at p (2-byte aligned) as odd and even elements.
HWY_INLINE void load_pairs(DC d, const uint8_t* p, hn::Vec<DC>& odd, hn::Vec<DC>& even) {
    const DU du;
    const hn::Repartition<uint16_t, DU> d16;
    const auto words = hn::BitCast(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p)));
    odd = hn::BitCast(d, hn::And(words, hn::Set(du, 0xFFFF0000u)));
    even = hn::BitCast(d, hn::ShiftLeft<16>(words));
}

// R weight rows x C activation rows, whole rows: the 16 canonical lanes of
// every cell go through the row in 16 / N passes of one vector each (N lanes
// a vector), so a tile's cells take R x C registers, not 16 / N times that;
// the rows come back from cache on the later passes.
template <int R, int C>
void emulated_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                   size_t y_stride) {
    const DC d;
    const size_t N = hn::Lanes(d);
    float lanes[R][C][16];
    const int64_t whole = n / 32 * 32;
    // The last chunk zero-padded to 32 elements.
    HWY_ALIGN uint16_t w_tail[R][32], x_tail[C][32];
    if (whole < n) {
        TESSERA_UNROLL
        for (int r = 0; r < R; ++r) {
            std::fill(w_tail[r], w_tail[r] + 32, uint16_t{0});
            std::memcpy(w_tail[r], w + r * w_stride + 2 * whole, static_cast<size_t>(2 * (n - whole)));
        }
        TESSERA_UNROLL
        for (int c = 0; c < C; ++c) {
            std::fill(x_tail[c], x_tail[c] + 32, uint16_t{0});
            std::memcpy(x_tail[c], x + c * x_stride + 2 * whole, static_cast<size_t>(2 * (n - whole)));
        }
    }
    for (size_t v = 0; v < 16; v += N) {
        hn::Vec<DC> acc[R][C];
        TESSERA_UNROLL
        for (int r = 0; r < R; ++r) {
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
        }
        {
            [[maybe_unused]] const FlushDenormals flushing;
            TESSERA_UNROLL
            for (int r = 0; r < R; ++r) {
                TESSERA_UNROLL
                for (int c = 0; c < C; ++c) pin(acc[r][c]);
            }
            const Ahead near = C == 1 ? near_prefetch(QuantType::BF16) : Ahead::kNone;
            // Whole chunks from the rows, then the padded last one (no
            // lambda over the accumulators: it kept them in memory).
            for (int64_t i = 0; i < n; i += 32) {
                const bool last = i == whole;
                if (C == 1 && v == 0 && !last) prefetch_rows<R>(w, w_stride, i, near);
                hn::Vec<DC> x_odd[C], x_even[C];
                TESSERA_UNROLL
                for (int c = 0; c < C; ++c) {
                    const uint8_t* xc = last ? reinterpret_cast<const uint8_t*>(x_tail[c]) : x + c * x_stride + 2 * i;
                    load_pairs(d, xc + 4 * v, x_odd[c], x_even[c]);
                }
                TESSERA_UNROLL
                for (int r = 0; r < R; ++r) {
                    const uint8_t* wr = last ? reinterpret_cast<const uint8_t*>(w_tail[r]) : w + r * w_stride + 2 * i;
                    hn::Vec<DC> w_odd, w_even;
                    load_pairs(d, wr + 4 * v, w_odd, w_even);
                    TESSERA_UNROLL
                    for (int c = 0; c < C; ++c) {
                        acc[r][c] = step(d, w_even, x_even[c], step(d, w_odd, x_odd[c], acc[r][c]));
                    }
                }
            }
            TESSERA_UNROLL
            for (int r = 0; r < R; ++r) {
                TESSERA_UNROLL
                for (int c = 0; c < C; ++c) pin(acc[r][c]);
            }
        }
        TESSERA_UNROLL
        for (int r = 0; r < R; ++r) {
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], d, lanes[r][c] + v);
        }
    }
    // The tree outside the flush mode: plain adds, as the reference's.
    TESSERA_UNROLL
    for (int r = 0; r < R; ++r) {
        TESSERA_UNROLL
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = lanes16_tree(lanes[r][c]);
    }
}

using TileKernel = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);

// kernels[r - 1][c - 1]: the kernel of an r x c tile, every shape up to R x C.
template <template <int, int> class K, int R, int... Cs>
constexpr std::array<TileKernel, sizeof...(Cs)> kernel_row(std::integer_sequence<int, Cs...>) {
    return {K<R, Cs + 1>::run...};
}
template <template <int, int> class K, int C, int... Rs>
constexpr std::array<std::array<TileKernel, C>, sizeof...(Rs)> kernel_table(std::integer_sequence<int, Rs...>) {
    return {kernel_row<K, Rs + 1>(std::make_integer_sequence<int, C>())...};
}

template <int R, int C>
struct Emulated {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* y, size_t ys) {
        emulated_tile<R, C>(n, w, ws, x, xs, y, ys);
    }
};

// A call's tiles: one column (a token's product) in blocks of kColumnRows
// rows, several in kTileRows x kTileCols tiles, as many accumulators as the
// registers hold beside the pairs (2 a column, 2 a row): AVX-512 and NEON
// (32 registers) 4 x 4, AVX2 and SSE4 (16) 4 x 2.
template <int kTileRows, int kTileCols, int kColumnRows, template <int, int> class K>
void tiles(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride, int n_cols,
           float* y, size_t y_stride) {
    static constexpr auto kernels = kernel_table<K, kTileCols>(std::make_integer_sequence<int, kTileRows>());
    static constexpr auto column = kernel_table<K, 1>(std::make_integer_sequence<int, kColumnRows>());
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    if (n_cols == 1) {
        for (int r0 = 0; r0 < n_rows; r0 += kColumnRows) {
            const int rr = std::min(n_rows - r0, kColumnRows);
            column[rr - 1][0](n, wb + r0 * w_stride, w_stride, xb, x_stride, y + r0, y_stride);
        }
        return;
    }
    for (int r0 = 0; r0 < n_rows; r0 += kTileRows) {
        const int rr = std::min(n_rows - r0, kTileRows);
        for (int c0 = 0; c0 < n_cols; c0 += kTileCols) {
            const int cc = std::min(n_cols - c0, kTileCols);
            kernels[rr - 1][cc - 1](n, wb + r0 * w_stride, w_stride, xb + c0 * x_stride, x_stride,
                                    y + c0 * y_stride + r0, y_stride);
        }
    }
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
constexpr int kEmulatedRows = 4, kEmulatedCols = 2, kEmulatedColumnRows = 4;
#else
constexpr int kEmulatedRows = 4, kEmulatedCols = 4, kEmulatedColumnRows = 4;
#endif

void emulated_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                           int n_cols, float* y, size_t y_stride) {
    tiles<kEmulatedRows, kEmulatedCols, kEmulatedColumnRows, Emulated>(n, w, w_stride, n_rows, x, x_stride, n_cols,
                                                                       y, y_stride);
}

float emulated_dot(int64_t n, const void* w, const void* x) {
    float y;
    emulated_tile<1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &y, 1);
    return y;
}
#endif  // !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

}  // namespace bf16_pairs
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();

// ---- vdpbf16ps (AVX3_DL on a CPU with AVX-512 BF16) ----
#if HWY_TARGET == HWY_AVX3_DL
#include "ops/vnni_target.h"

TESSERA_AVX512BF16_PUSH
HWY_BEFORE_NAMESPACE();
TESSERA_AVX512BF16_BEGIN
namespace tessera {
namespace HWY_NAMESPACE {
namespace bf16_pairs {

// R x C cells of one zmm each: a cell's 16 lanes are the canonical lanes,
// and one vdpbf16ps takes a chunk of 32 elements through all of them. The
// last chunk's elements past n load as zeros (the canonical padding).
// lanes16_tree in registers: lane j + lane j + 8 is the two 256-bit
// halves' sum, then j + 4 the 128-bit halves', j + 2 and j + 1 within one:
// the same additions, so the same bits.
HWY_INLINE float tree16(__m512 v) {
    const __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

// Bytes of one row's 32-element piece and of a group's chunk of them (16
// rows' pieces of the same elements): BF16's group layout (ops/row_groups.h).
inline constexpr size_t kPieceBytes = 64, kChunkBytes = kGroupRows * kPieceBytes;

// R x C cells of one zmm each: a cell's 16 lanes are the canonical lanes,
// and one vdpbf16ps takes a chunk of 32 elements through all of them. The
// last chunk's elements past n load as zeros (the canonical padding). One
// loop for whole and last chunks (the mask), and no lambda over the
// accumulators: GCC kept those in memory across a lambda's calls.
// kGrouped: the rows are a group's (row r's first piece at w + r * w_stride,
// chunk k kChunkBytes further on per k), n a multiple of 32, and no hint:
// the group is one stream the hardware prefetcher follows. Its weights take
// plain loads, never masked ones: on a Zen 5 a stream of masked loads read
// memory at 12.9 GB/s against 25.7-28.9 plain (kernel_bench --gen, cold),
// and generation ran at 0.42 of the read ceiling against 0.94-0.96.
template <bool kGrouped, int R, int C>
void native_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                 size_t y_stride) {
    __m512 acc[R][C];
    TESSERA_UNROLL
    for (int r = 0; r < R; ++r) {
        TESSERA_UNROLL
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    const Ahead near = C == 1 && !kGrouped ? near_prefetch(QuantType::BF16) : Ahead::kNone;
    for (int64_t i = 0; i < n; i += 32) {
        const __mmask32 mask = n - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint32_t{1} << (n - i)) - 1);
        if (C == 1) prefetch_rows<R>(w, w_stride, i, near);
        const uint8_t* wi = kGrouped ? w + static_cast<size_t>(i / 32) * kChunkBytes : w + 2 * i;
        __m512bh xv[C];
        TESSERA_UNROLL
        for (int c = 0; c < C; ++c) xv[c] = (__m512bh)_mm512_maskz_loadu_epi16(mask, x + c * x_stride + 2 * i);
        // Up to 16 rows (a group's, one column): every accumulator in a register.
        _Pragma("GCC unroll 16")
        for (int r = 0; r < R; ++r) {
            const auto wv = kGrouped ? (__m512bh)_mm512_loadu_si512(wi + r * w_stride)
                                     : (__m512bh)_mm512_maskz_loadu_epi16(mask, wi + r * w_stride);
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv, xv[c]);
        }
    }
    TESSERA_UNROLL
    for (int r = 0; r < R; ++r) {
        TESSERA_UNROLL
        for (int c = 0; c < C; ++c) y[c * y_stride + r] = tree16(acc[r][c]);
    }
}

template <int R, int C>
struct Native {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* y, size_t ys) {
        native_tile<false, R, C>(n, w, ws, x, xs, y, ys);
    }
};
template <int R, int C>
struct NativeGrouped {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* y, size_t ys) {
        native_tile<true, R, C>(n, w, ws, x, xs, y, ys);
    }
};

// 4 x 6 cells: 24 accumulators, 6 columns' chunks and a row's, of 32
// registers. vdpbf16ps's latency is long (a 2-vCPU Zen 5: one a cycle from
// 24 independent chains, 0.45 a cycle from 12): 4 x 4 cells reached 123
// GFLOP/s in kernel_bench's BF16 tile, half of llama.cpp's prefill rate.
// One column: 8 rows, 8 streams of memory.
void native_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                         int n_cols, float* y, size_t y_stride) {
    tiles<4, 6, 8, Native>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
}

// The same tiles over one group's rows (n a multiple of 32, w_stride a
// piece): one column takes the group's 16 rows at once, a single pass over
// its bytes in memory order.
void native_group_tiles(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                        int n_cols, float* y, size_t y_stride) {
    tiles<4, 6, kGroupRows, NativeGrouped>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
}

float native_dot(int64_t n, const void* w, const void* x) {
    float y;
    native_tile<false, 1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &y, 1);
    return y;
}

}  // namespace bf16_pairs
}  // namespace HWY_NAMESPACE
}  // namespace tessera
HWY_AFTER_NAMESPACE();
TESSERA_AVX512BF16_POP
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // include guard
