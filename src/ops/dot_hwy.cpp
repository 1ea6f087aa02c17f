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

#include "ops/bf16_pairs-inl.h"
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
#include "ops/group_prefetch.h"
#include "ops/int8_dot_extension.h"
#include "ops/quant_blocks.h"
#include "util/fp16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

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
        return bf16_to_fp32(h);
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

// Bytes of one 16-element piece of a row, and of a group's chunk (16 rows'
// pieces of the same 16 elements): the group layout of the float types
// (ops/row_groups.h), row r's piece of chunk k at k * chunk + r * piece.
template <int kHalf>
inline constexpr size_t kFloatPieceBytes = 16 * (kHalf == kF32 ? 4 : 2);
template <int kHalf>
inline constexpr size_t kFloatChunkBytes = kGroupRows * kFloatPieceBytes<kHalf>;

// Lanes [i, i + Lanes(d)) of a weight row that starts at wr, none of them
// past the next multiple of 16: in GGUF's rows element i is at i element
// bytes; in a group (kGrouped, wr at the row's first piece) at lane i % 16
// of chunk i / 16.
template <int kHalf, bool kGrouped, class D>
HWY_INLINE hn::Vec<D> load_lanes(D d, const uint8_t* wr, int64_t i) {
    if constexpr (kGrouped) {
        return load_weights<kHalf>(d, wr + static_cast<size_t>(i >> 4) * kFloatChunkBytes<kHalf>, i & 15);
    } else {
        return load_weights<kHalf>(d, wr, i);
    }
}

// Float dot products run in the canonical order of canonical_math-inl.h's
// Lanes16 (16 virtual lanes of fused multiply-adds, then a fixed tree), the
// same bits on every target; attention's scores and F32/F16 weights go
// through them, and the exact modes need those bits not to depend on a
// node's CPU (ops/float_canonical.h is the scalar definition).
#if !HWY_HAVE_SCALABLE
using DC = hn::CappedTag<float, 16>;

// Tile shapes per target: as many independent chains of fused multiply-adds
// as the registers hold beside a tile's weight and activation vectors; and
// the span, the elements of n that several columns go through before the
// next: a tile's weight rows (8 KiB of BF16 at 4 rows of 1024) stay in L1
// while every column passes them, and the columns' span (256 KiB at 64
// columns) in L2.
// - AVX-512 (32 registers, a cell is 1): 8 x 3 in spans of 1024, 8 rows for
//   one column. Measured on a 2-vCPU AMD EPYC Zen 5, F16 prefill of the 1.1B
//   shape (pp256), 1 thread: 62 tok/s with 4 x 4 cells of Lanes16 over whole
//   rows, 71.5 with 4 x 6 in spans (`kernel_bench --type F16`'s tile: 96 ->
//   ~140 GFLOP/s; 3 x 8 and 4 x 7 were slower, spans of 512 and 2048 alike).
//   Widening a tile's F16 rows to F32 once per span for all 64 columns (so no
//   tile converts) was slower still: 55 tok/s. Then 8 x 3 (a later Zen 5
//   host, alternating runs): in L1 both shapes run ~195 GFLOP/s (0.87 of
//   the 512-bit multiply-add peak), but the columns' span comes from L2 once
//   per row tile, half as often with 8 rows: `kernel_bench --groups --type
//   F16` 64 -> 80 G multiply-adds/s (medians), pp64 60-64 -> 67-70 tok/s at
//   1 thread, 104-121 -> 125-141 at 2. Keeping a column tile in L1 across
//   the row tiles instead (columns outer) reached 75.
// - AVX2 (16 registers, a cell is 2, or 1 by halves): 4 x 3 cells by halves,
//   12 registers, 8 rows for one column. Measured on a 2-vCPU AMD EPYC
//   (AVX2), BF16 prefill of the 1.1B shape, 1 thread: 19.6 tok/s with 2 x 4
//   tiles of 16 lanes (4 of the 16 cells' registers spilled) over whole rows;
//   26.7 by halves; 29.4 in spans of 1024 (512: 28.5, 2048: 28.2). One
//   column, BF16 generation: 8 rows 9.4-9.6 tok/s against 8.5-8.7 with 4
//   (2: 6.5-7.1, 6: 9.0-9.6) at 1 thread, 16.4-18.7 against 14.4-16.6 at 2:
//   more rows streaming at once, though their 16 registers spill.
// - 128-bit targets (a cell is 4 registers): 2 x 4, 2 rows for one column;
//   whole rows.
constexpr int64_t kWholeRows = std::numeric_limits<int64_t>::max() / 2;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kFloatTileRows = 8, kFloatTileCols = 3, kFloatColumnRows = 8, kFloatPassLanes = 16;
constexpr bool kFloatSpans = true;
constexpr int64_t kFloatSpan = 1024;
#elif HWY_TARGET == HWY_AVX2
constexpr int kFloatTileRows = 4, kFloatTileCols = 3, kFloatColumnRows = 8, kFloatPassLanes = 8;
constexpr bool kFloatSpans = true;
constexpr int64_t kFloatSpan = 1024;
#else
constexpr int kFloatTileRows = 2, kFloatTileCols = 4, kFloatColumnRows = 2, kFloatPassLanes = 16;
constexpr bool kFloatSpans = false;
constexpr int64_t kFloatSpan = kWholeRows;
#endif
// Only the span kernel keeps lanes between spans.
static_assert(kFloatSpans || kFloatSpan == kWholeRows);
constexpr int kFloatMaxRows = 16, kFloatMaxCols = 64;  // a call of matmul's blocking

// The last elements [i, n) of R weight rows and C activation rows (fewer
// than 16), zero-padded to 16 as float_canonical.h defines them.
template <int kHalf, int R, int C>
HWY_INLINE void tail_rows(int64_t n, int64_t i, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride,
                          float (&w_tail)[R][16], float (&x_tail)[C][16]) {
    for (int64_t j = 0; j < 16; ++j) {
        const bool in = i + j < n;
        for (int r = 0; r < R; ++r) w_tail[r][j] = in ? weight_scalar<kHalf>(w + r * w_stride, i + j) : 0.0f;
        for (int c = 0; c < C; ++c) x_tail[c][j] = in ? activation_scalar(x + c * x_stride, i + j) : 0.0f;
    }
}

// R weight rows x C activation rows, whole rows, in registers. kGrouped:
// the rows are in a group (row r's first piece at w + r * w_stride) and n is
// a multiple of 16.
template <int kHalf, bool kGrouped, int R, int C>
void float_tile(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, float* y,
                size_t y_stride) {
    const DC d;
    canonical::Lanes16<DC> acc[R][C];
    // One column (a token's product) streams its R rows at once, R streams of
    // memory, and a hardware prefetcher restarts at each 4 KiB page of each
    // (ops/group_prefetch.h): the kernel asks for every row's lines ahead
    // itself, the policy's distance shared among the rows. A hint: no bits
    // change.
    constexpr int64_t kElementBytes = kHalf == kF32 ? 4 : 2;
    // A group is one stream, which the hardware prefetcher follows: no hint
    // (asking for its chunks ahead under l2 took F16 generation from 0.81 to
    // 0.63 of the read ceiling, 1.1B shape, Zen 4). matmul's prefetch_chunk
    // starts the stream.
    const Ahead near = C == 1 && !kGrouped ? near_prefetch(kHalf == kF16 ? QuantType::F16 : kHalf == kBF16 ? QuantType::BF16_F32ACT : QuantType::F32) : Ahead::kNone;
    const int64_t far_ahead = far_prefetch_bytes(near) / R, near_ahead = kL1PolicyNearBytes / R;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (C == 1 && near != Ahead::kNone && (i * kElementBytes) % 64 == 0) {
            TESSERA_UNROLL
            for (int r = 0; r < R; ++r) {
                const uint8_t* line = w + r * w_stride + i * kElementBytes;
                __builtin_prefetch(line + far_ahead, 0, 2);
                if (near == Ahead::kL2AndL1) __builtin_prefetch(line + near_ahead, 0, 3);
            }
        }
        // Up to 16 rows (a group's, one column): every accumulator in a register.
        _Pragma("GCC unroll 16")
        for (int r = 0; r < R; ++r) {
            const uint8_t* wr = w + r * w_stride;
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) {
                const float* xc = reinterpret_cast<const float*>(x + c * x_stride) + i;
                acc[r][c].mul_add(
                    [&](size_t o) { return load_lanes<kHalf, kGrouped>(d, wr, i + static_cast<int64_t>(o)); },
                    [&](size_t o) { return hn::LoadU(d, xc + o); });
            }
        }
    }
    if (!kGrouped && i < n) {
        HWY_ALIGN float w_tail[R][16], x_tail[C][16];
        tail_rows<kHalf, R, C>(n, i, w, w_stride, x, x_stride, w_tail, x_tail);
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

// The elements [i, n) (fewer than 16) into each cell's 16 lanes, zero-padded
// to 16 (float_canonical.h's definition).
template <int kHalf, int R, int C>
HWY_NOINLINE void float_tile_tail(int64_t n, int64_t i, const uint8_t* w, size_t w_stride, const uint8_t* x,
                                  size_t x_stride, float* lanes) {
    const DC d;
    HWY_ALIGN float w_tail[R][16], x_tail[C][16];
    tail_rows<kHalf, R, C>(n, i, w, w_stride, x, x_stride, w_tail, x_tail);
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            canonical::Lanes16<DC> cell;
            cell.load(lanes + (r * C + c) * 16);
            cell.mul_add([&](size_t o) { return hn::Load(d, w_tail[r] + o); },
                         [&](size_t o) { return hn::Load(d, x_tail[c] + o); });
            cell.store(lanes + (r * C + c) * 16);
        }
    }
}

// Several columns through a span of the elements [begin, end), the cells'
// 16 lanes kept in `lanes` between spans (so a tile's activations stay in
// L1 while its rows pass them), in passes of kFloatPassLanes: on AVX2, whose 16
// registers hold only 6 cells of 16 lanes (2 registers each) beside the
// tile's weights and activations, lanes 0-7 and 8-15 of a cell never meet
// before the tree, so they go through the span in two passes, a cell one
// register in each; on AVX-512 a cell is one register and one pass. The
// elements past the last multiple of 16 and the tree are Lanes16's, as in
// float_tile.
template <int kHalf, bool kGrouped, int R, int C>
void float_tile_span_passes(int64_t n, int64_t begin, int64_t end, const uint8_t* w, size_t w_stride,
                            const uint8_t* x, size_t x_stride, float* lanes, float* y, size_t y_stride) {
    const hn::CappedTag<float, kFloatPassLanes> d;
    const int64_t whole_end = begin + (end - begin) / 16 * 16;
    for (int64_t pass = 0; pass < 16; pass += kFloatPassLanes) {
        hn::Vec<decltype(d)> acc[R][C];
        TESSERA_UNROLL
        for (int r = 0; r < R; ++r) {
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) {
                acc[r][c] = begin > 0 ? hn::LoadU(d, lanes + (r * C + c) * 16 + pass) : hn::Zero(d);
            }
        }
        for (int64_t i = begin + pass; i < whole_end; i += 16) {
            hn::Vec<decltype(d)> xv[C];
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) xv[c] = hn::LoadU(d, reinterpret_cast<const float*>(x + c * x_stride) + i);
            TESSERA_UNROLL
            for (int r = 0; r < R; ++r) {
                const auto wv = load_lanes<kHalf, kGrouped>(d, w + r * w_stride, i);
                TESSERA_UNROLL
                for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(wv, xv[c], acc[r][c]);
            }
        }
        TESSERA_UNROLL
        for (int r = 0; r < R; ++r) {
            TESSERA_UNROLL
            for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], d, lanes + (r * C + c) * 16 + pass);
        }
    }
    if (end < n) return;
    if (!kGrouped && whole_end < n) float_tile_tail<kHalf, R, C>(n, whole_end, w, w_stride, x, x_stride, lanes);
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            canonical::Lanes16<DC> cell;
            cell.load(lanes + (r * C + c) * 16);
            y[c * y_stride + r] = cell.reduce();
        }
    }
}

// float_tile as a span kernel, for the targets whose span is the whole row
// (begin 0, end n; no lanes kept between spans).
template <int kHalf, bool kGrouped, int R, int C>
void float_tile_whole(int64_t n, int64_t, int64_t, const uint8_t* w, size_t w_stride, const uint8_t* x,
                      size_t x_stride, float*, float* y, size_t y_stride) {
    float_tile<kHalf, kGrouped, R, C>(n, w, w_stride, x, x_stride, y, y_stride);
}

template <int kHalf>
float float_dot(int64_t n, const void* w, const void* x) {
    float y;
    float_tile<kHalf, false, 1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &y, 1);
    return y;
}
#else
// Scalable vectors cannot be class members: the scalar definition.
template <int kHalf>
float float_dot(int64_t n, const void* w, const void* x) {
    if constexpr (kHalf == kBF16) return bf16_f32_vec_dot(n, w, x);
    return kHalf == kF16 ? f16_dot_canonical(n, w, static_cast<const float*>(x))
                         : f32_dot_canonical(n, static_cast<const float*>(w), static_cast<const float*>(x));
}
#endif  // !HWY_HAVE_SCALABLE

#if !HWY_HAVE_SCALABLE
using SpanKernel = void (*)(int64_t, int64_t, int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, float*,
                            size_t);

// kernels[r - 1][c - 1]: the kernel of an r x c tile, every tile shape up
// to R x C, the edges of a matrix as smaller instantiations.
template <int kHalf, bool kGrouped, bool kSpans, int R, int... Cs>
constexpr std::array<SpanKernel, sizeof...(Cs)> span_kernel_row(std::integer_sequence<int, Cs...>) {
    if constexpr (kSpans) return {float_tile_span_passes<kHalf, kGrouped, R, Cs + 1>...};
    return {float_tile_whole<kHalf, kGrouped, R, Cs + 1>...};
}
template <int kHalf, bool kGrouped, bool kSpans, int C, int... Rs>
constexpr std::array<std::array<SpanKernel, C>, sizeof...(Rs)> span_kernels(std::integer_sequence<int, Rs...>) {
    return {span_kernel_row<kHalf, kGrouped, kSpans, Rs + 1>(std::make_integer_sequence<int, C>())...};
}

#endif  // !HWY_HAVE_SCALABLE

#if !HWY_HAVE_SCALABLE
// The tiles of a product over rows in GGUF's layout (w_stride apart) or, with
// kGrouped, over the rows of one group (ops/row_groups.h: w_stride is a
// piece, n a multiple of 16, n_rows at most 16).
template <int kHalf, bool kGrouped>
void float_tiles(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride, int n_cols,
                 float* y, size_t y_stride) {
    static constexpr auto kernels =
        span_kernels<kHalf, kGrouped, kFloatSpans, kFloatTileCols>(std::make_integer_sequence<int, kFloatTileRows>());
    // One column over a group takes its 16 rows at once: a single pass over
    // the group's bytes in memory order.
    constexpr int kColumnRows = kGrouped ? kGroupRows : kFloatColumnRows;
    static constexpr auto column_kernels =
        span_kernels<kHalf, kGrouped, false, 1>(std::make_integer_sequence<int, kColumnRows>());
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* xb = static_cast<const uint8_t*>(x);
    if (n_cols == 1) {
        // One column (a token's matrix-vector product) reads each weight once:
        // whole rows, more of them at once (2 rows left AVX-512 latency-bound
        // at ~0.7 of the memory's speed, BF16 at the 1.1B shape).
        for (int r0 = 0; r0 < n_rows; r0 += kColumnRows) {
            const int rr = std::min(n_rows - r0, kColumnRows);
            column_kernels[rr - 1][0](n, 0, n, wb + r0 * w_stride, w_stride, xb, x_stride, nullptr, y + r0, y_stride);
        }
        return;
    }
    // Each cell's 16 lanes between spans, up to 64 KiB per thread: on the
    // heap when first needed, not in every thread's static TLS block (which
    // each thread of every process would carry, float weights or not).
    thread_local std::vector<float> lanes_store;
    const size_t lanes_needed = static_cast<size_t>(std::min(n_rows, kFloatMaxRows)) *
                                static_cast<size_t>(std::min(n_cols, kFloatMaxCols)) * 16;
    const bool keeps_lanes = kFloatSpans || kFloatSpan < n;  // else each cell stays in registers
    if (keeps_lanes && lanes_store.size() < lanes_needed) lanes_store.resize(lanes_needed);
    for (int rs = 0; rs < n_rows; rs += kFloatMaxRows) {
        const int nr = std::min(n_rows - rs, kFloatMaxRows);
        for (int cs = 0; cs < n_cols; cs += kFloatMaxCols) {
            const int nc = std::min(n_cols - cs, kFloatMaxCols);
            for (int64_t begin = 0; begin < n || begin == 0; begin += kFloatSpan) {
                const int64_t end = std::min(n, begin + kFloatSpan);
                for (int r0 = 0; r0 < nr; r0 += kFloatTileRows) {
                    const int rr = std::min(nr - r0, kFloatTileRows);
                    const uint8_t* tile_w = wb + (rs + r0) * w_stride;
                    for (int c0 = 0; c0 < nc; c0 += kFloatTileCols) {
                        const int cc = std::min(nc - c0, kFloatTileCols);
                        kernels[rr - 1][cc - 1](n, begin, end, tile_w, w_stride,
                                                xb + (cs + c0) * x_stride, x_stride,
                                                keeps_lanes ? lanes_store.data() + (r0 * nc + c0 * rr) * 16 : nullptr,
                                                y + (cs + c0) * y_stride + rs + r0, y_stride);
                    }
                }
            }
        }
    }
}
#endif  // !HWY_HAVE_SCALABLE

template <int kHalf>
void float_vec_dot_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* x, size_t x_stride,
                        int n_cols, float* y, size_t y_stride) {
#if HWY_HAVE_SCALABLE
    // Scalable vectors cannot be held in arrays: tiles as single dot products.
    vec_dot_tile_by_dots<float_dot<kHalf>>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
#else
    float_tiles<kHalf, false>(n, w, w_stride, n_rows, x, x_stride, n_cols, y, y_stride);
#endif
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
using TilesFn = void (*)(int64_t, const void*, size_t, int, const void*, size_t, int, float*, size_t);

// QuantTraits::vec_dot_groups of a float type (F16 and BF16: their group
// layouts in ops/row_groups.h), from kTiles over one group's rows: each
// unit's dot products in float_canonical.h's order, the same bits as the row
// kernels. Only on AVX-512, whose 32 registers hold a group's 16 rows' lanes
// for one column, so that a token reads each group in one pass; narrower
// targets keep the rows in GGUF's layout. Each unit starts its lanes at zero
// (a sum cannot resume them), so a grouped float matrix is always one panel;
// with accumulate, each unit's dot product is added to what y held.
// kPiece: elements of a row's piece, kPieceBytes its bytes, kActivationBytes
// an activation element's.
template <TilesFn kTiles, int64_t kPiece, size_t kPieceBytes, size_t kActivationBytes>
void float_vec_dot_groups(int64_t n, const void* w, size_t group_stride, int n_groups, const void* x,
                          size_t x_stride, const int32_t*, size_t, int n_cols, float* y, size_t y_stride,
                          int64_t unit_n, size_t unit_stride, bool accumulate) {
    if (unit_n <= 0 || unit_n > n) unit_n = n;
    constexpr size_t kChunkBytes = kGroupRows * kPieceBytes;
    float before[kGroupRows];
    for (int g = 0; g < n_groups; ++g) {
        const auto* group = static_cast<const uint8_t*>(w) + static_cast<size_t>(g) * group_stride;
        for (int64_t u0 = 0, u = 0; u0 < n; u0 += unit_n, ++u) {
            const int64_t span = std::min(unit_n, n - u0);
            const uint8_t* wu = group + static_cast<size_t>(u0 / kPiece) * kChunkBytes;
            const auto* xu = static_cast<const uint8_t*>(x) + static_cast<size_t>(u0) * kActivationBytes;
            float* yu = y + static_cast<size_t>(u) * unit_stride + static_cast<size_t>(g) * kGroupRows;
            if (!accumulate) {
                kTiles(span, wu, kPieceBytes, kGroupRows, xu, x_stride, n_cols, yu, y_stride);
                continue;
            }
            // Column by column: what y held, then the dot products added to it.
            for (int c = 0; c < n_cols; ++c) {
                float* yc = yu + static_cast<size_t>(c) * y_stride;
                std::copy_n(yc, kGroupRows, before);
                kTiles(span, wu, kPieceBytes, kGroupRows, xu + static_cast<size_t>(c) * x_stride, x_stride, 1, yc,
                       y_stride);
                for (int r = 0; r < kGroupRows; ++r) yc[r] += before[r];
            }
        }
    }
}
#endif

void f16_to_float_simd(const void* src, float* dst, int64_t n) {
    const DF d;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto* h = static_cast<const hwy::float16_t*>(src);
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, h + i)), d, dst + i);
    for (; i < n; ++i) dst[i] = weight_scalar<kF16>(static_cast<const uint8_t*>(src), i);
}

// ---- BF16 activations (and weights) from floats (portable Highway) ----

// The scalar reference's bytes (bf16_from_float, ggml's rounding): the
// nearest BF16 value, ties to even, NaNs kept quiet.
void bf16_from_float_simd(const float* src, void* dst, int64_t n) {
    const DF d;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint16_t, decltype(di)> d16;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    auto* out = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
        const auto bits = hn::BitCast(du, hn::LoadU(d, src + i));
        const auto nan = hn::Gt(hn::And(bits, hn::Set(du, 0x7fffffffu)), hn::Set(du, 0x7f800000u));
        const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
        const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), odd)));
        const auto quiet = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 64u));
        // As int32 (every value below 2^16): Highway 1.0.3 demotes those to uint16 on every target.
        hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::IfThenElse(nan, quiet, rounded))), d16, out + i);
    }
    if (i < n) bf16_from_float(src + i, out + i, n - i);
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
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
        t.vec_dot_groups = float_vec_dot_groups<float_tiles<kF16, true>, 16, kFloatPieceBytes<kF16>, 4>;
#endif
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
    // A router narrowed to BF16 (F32 activations, the float kernels).
    static const QuantTraits bf16_f32act = [] {
        QuantTraits t = *scalar_traits(QuantType::BF16_F32ACT);
        t.vec_dot = float_dot<kBF16>;
        t.vec_dot_tile = float_vec_dot_tile<kBF16>;
        return t;
    }();
    // BF16 weights (BF16 activations, ops/bf16_pairs-inl.h).
    static const QuantTraits bf16 = [] {
        QuantTraits t = *scalar_traits(QuantType::BF16);
        t.from_float = bf16_from_float_simd;
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
        t.vec_dot = bf16_pairs::emulated_dot;
        t.vec_dot_tile = bf16_pairs::emulated_vec_dot_tile;
#endif
#if HWY_TARGET == HWY_AVX3_DL
        if (avx512_bf16_supported()) {
            t.vec_dot = bf16_pairs::native_dot;
            t.vec_dot_tile = bf16_pairs::native_vec_dot_tile;
            t.vec_dot_groups = float_vec_dot_groups<bf16_pairs::native_group_tiles, 32, bf16_pairs::kPieceBytes, 2>;
        }
#endif
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
        case QuantType::BF16_F32ACT: return &bf16_f32act;
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
