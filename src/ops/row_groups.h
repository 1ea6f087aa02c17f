// Weights in groups of 16 rows: an in-memory layout of our own, made when a
// slice's weights are copied into private memory (never a file format).
//
// A matrix-vector product over GGUF's row-major layout reads several rows at
// once to share each activation load, i.e. several interleaved short streams
// the hardware prefetcher follows poorly, and it spends most of its
// instructions unpacking one row's block and its scale at a time. In a group,
// block b of 16 rows is one contiguous run that a 512-bit kernel takes in with
// a few full-width loads, one row per 32-bit lane, so a token streams each
// matrix front to back in a single sequential pass.
//
// Q4_0 group, per block b (288 bytes, the same as its 16 rows' blocks):
//   bytes [0, 32)     the 16 rows' fp16 scales, row r at 2r
//   bytes [32, 288)   chunk k (k < 4) at 32 + 64k: row r's packed bytes
//                     qs[4k .. 4k + 3] at 32 + 64k + 4r (low nibbles are
//                     weights 4k.., high nibbles weights 16 + 4k..)
// Q8_0 group, per block b (544 bytes, the same as its 16 rows' blocks):
//   bytes [0, 32)     the 16 rows' fp16 scales, row r at 2r
//   bytes [32, 544)   chunk k (k < 8) at 32 + 64k: row r's codes
//                     qs[4k .. 4k + 3] + 128 (unsigned) at 32 + 64k + 4r
// Q4_K group, per super-block b (2368 bytes, 64 more than its 16 rows' blocks:
// the 6-bit scales and mins are stored unpacked, one byte each, so a kernel
// takes a sub-block's 16 scales in one widening load):
//   bytes [0, 32)       fp16 d, row r at 2r
//   bytes [32, 64)      fp16 dmin, row r at 32 + 2r
//   bytes [64, 192)     sub-block j's scale of row r at 64 + 16j + r
//   bytes [192, 320)    sub-block j's min of row r at 192 + 16j + r
//   bytes [320, 2368)   64-element chunk j (j < 4) at 320 + 512j: row r's
//                       qs[32j + 4k .. 32j + 4k + 3] at 320 + 512j + 64k + 4r
//                       (low nibbles: sub-block 2j, high: sub-block 2j + 1)
// Q6_K group, per super-block b (3360 bytes, the same as its 16 rows' blocks):
//   bytes [0, 32)       fp16 d, row r at 2r
//   bytes [32, 288)     sub-block j's int8 scale of row r at 32 + 16j + r
//   bytes [288, 3360)   64-element chunk h (h < 4) at 288 + 768h:
//     [+64k, k < 8)     row r's 4 bytes at 4r: low 4 bits of the codes of
//                       elements 64h + 4k + i (low nibble of byte i) and
//                       64h + 32 + 4k + i (high nibble)
//     [+512 + 64m, m < 4) row r's byte i at 4r: the codes' top 2 bits, of
//                       vector 2m's low, its high, vector 2m + 1's low, its
//                       high nibble's element at bits 0, 2, 4, 6 (as qh packs them)
// F16 group, per 16-element piece b (512 bytes, the same as its 16 rows'):
//   bytes [32r, 32r + 32)  row r's elements 16b .. 16b + 15
// BF16 group, per 32-element piece b (1024 bytes): row r's elements
//   32b .. 32b + 31 at bytes [64r, 64r + 64) (a chunk of vdpbf16ps's order)
// A matrix's last group is padded with zero rows (scales 0), so that every
// row is computed by the same kernel wherever a slice starts: results do not
// depend on how a model is split (the exact distributed modes rely on it).
//
// Column panels. A matrix is stored as panels of whole blocks of columns
// (GroupPanels): panel p holds columns [p * panel_cols, ...) of every group,
// group g of it at offset(p) + g * group_bytes(p), so a thread's run of
// groups reads each panel front to back. Rows short enough are one panel:
// group g at g * group_bytes(type, cols). Why panels: a kernel reads its
// activation block beside each weight block, and a group's row of blocks
// streams through L1 between two reads of the same activation block. Once
// that row is larger than ~20 KiB the activations no longer stay in L1: a
// Q4_0 product with 5632 columns (a 1.1B model's w_down; 50 KiB per group)
// streamed at 0.85-0.87 of the read ceiling at 2 threads, in panels of 17 or
// 6 KiB at 0.97-0.99 (Zen 5, alternating runs). A product over several
// panels continues each row's accumulation from panel to panel
// (QuantTraits::vec_dot_groups with accumulate), the same bits as one pass.
// F16 and BF16 rows keep 16 float lanes that no sum resumes
// (float_canonical.h): a grouped float matrix is always one panel.
#pragma once

#include "ops/group_prefetch.h"
#include "ops/quant_type.h"

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr int kGroupRows = 16;

// Whether `type` has a group layout (the quant types, F16 and BF16).
bool has_group_layout(QuantType type);

// Elements per block of a grouped type's layout (F16: 16, BF16: 32, a piece).
int64_t group_block_size(QuantType type);

// The most bytes of one group's row of blocks in a panel (see above).
inline constexpr uint64_t kPanelBytes = 20 * 1024;

// The layout of a grouped matrix of `cols` columns and n_groups groups: its
// panels of panel_cols columns, the last one narrower where they do not
// divide. Whatever the panels, a product gives the same bits.
struct GroupPanels {
    QuantType type;
    int64_t cols;
    int64_t panel_cols;
    int64_t n_groups;

    // The fewest equal panels of whole blocks within kPanelBytes per group.
    // With unit_cols (a column-split product's units, ops/matmul.h), panels
    // of as many whole units as fit instead (at least one), so that a unit
    // never straddles two panels.
    static GroupPanels for_matrix(QuantType type, int64_t cols, int64_t n_groups, int64_t unit_cols = 0);

    int64_t count() const { return (cols + panel_cols - 1) / panel_cols; }
    int64_t panel_of(int64_t col) const { return col / panel_cols; }
    // Columns of panel p, bytes of one of its groups, and where it starts.
    int64_t width(int64_t p) const;
    uint64_t group_bytes(int64_t p) const;
    uint64_t offset(int64_t p) const;
    // Where column `col` (a block boundary) of group g starts.
    uint64_t at(int64_t g, int64_t col) const;
    uint64_t total_bytes() const;
};

// Bytes of one group of 16 rows of n elements, and the offset of element
// `col` (a block boundary) within a group.
uint64_t group_bytes(QuantType type, int64_t n);
uint64_t group_col_offset(QuantType type, int64_t col);

// Writes rows [0, n_rows) (n_rows <= 16, each n elements, `row_stride` bytes
// apart) as one group at `out` (group_bytes long), zero rows after n_rows.
void group_rows(QuantType type, const uint8_t* rows, size_t row_stride, int n_rows, int64_t n, uint8_t* out);

// Writes n_rows rows (each panels.cols elements in GGUF's layout, row_stride
// bytes apart) as the grouped matrix `panels` describes, at out
// (panels.total_bytes() long; n_groups covers n_rows, the last group padded).
void group_matrix(const GroupPanels& panels, const uint8_t* rows, size_t row_stride, int64_t n_rows, uint8_t* out);

// Row r of a group of n-element rows, back in GGUF's layout.
void ungroup_row(QuantType type, const uint8_t* group, int64_t n, int r, uint8_t* row);

// The reference of every grouped kernel (QuantTraits::vec_dot_groups): each
// row ungrouped, then the type's scalar dot product of each unit with each
// column, added to y with accumulate (a fast kernel continues its sum
// instead: close, not the same bits). (The activations' block sums the fast
// kernels take are not needed here.)
void vec_dot_groups_reference(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride,
                              int64_t unit_n = 0, size_t unit_stride = 0, bool accumulate = false);

// The canonical order of the grouped products, which every target's grouped
// kernel reproduces bit for bit (AVX-512 VNNI, AVX2, NEON, SSE4, EMU128), so
// that nodes of different CPU kinds compute the same bits for a row (the
// exact distributed modes rely on it). Per row, per unit of columns:
// acc = accumulate ? y : 0; then for each block b in order,
//   Q4_0, Q8_0: s   = sum over the block of w_i * x_i     (an exact integer)
//               acc = fma(float(s), d_w(b) * d_x(b), acc)  (the scales'
//                     product rounded to float, one rounding in fma)
//   Q4_K:       scaled = sum_j sc_j * (q . y)_j, mins = sum_j m_j * sum(y)_j
//                     (exact integers over the 8 sub-blocks j)
//               block  = fma(-dmin, float(mins), d * float(scaled))
//               acc    = fma(d_x, block, acc)
//   Q6_K:       s = sum_j sc_j ((q - 32) . y)_j (exact), acc = fma(d_x, d * float(s), acc)
// and y = acc. Integer sums are exact whatever their order, so the only
// choices are the order of blocks and where the float roundings fall: those
// are fixed here. The other weight types' dot products (row layout so far)
// follow the same rule, per block in order:
//   Q5_0, IQ4_NL, MXFP4 (Q8_0 activations): acc = fma(float(s), d_w * d_x, acc)
//   Q5_1:  acc = fma(d_x, fma(m_w, float(sum x), d_w * float(s)), acc)
//   Q2_0:  per Q8_0 block of its 64 elements, s = sum (q - 1) x (exact),
//          acc = fma(float(s), d_w * d_x, acc)
//   Q1_0:  per Q8_0 block of its 128 elements, s = sum (bit ? x : -x) (exact),
//          acc = fma(float(s), d_w * d_x, acc)
//   NVFP4: per Q8_0 block h of its 64 elements, s_lo, s_hi the sums over its
//          two 16-element sub-blocks (exact), t = d_lo * float(s_lo),
//          t = fma(d_hi, float(s_hi), t), acc = fma(d_x, t, acc)
//   Q5_K, Q2_K: as Q4_K (scales and mins per sub-block)
//   Q6_K, Q3_K, IQ4_XS: s = sum_j s_j (v . y)_j (exact, the codes' offsets
//       included), acc = fma(d_x, d_w * float(s), acc)
// (ops/block32_scalar.h, iq4_scalar.h, kquant_scalar.h define them; Q6_K's
// SIMD row kernels reproduce them on every target.)
// F16 and BF16 have no block sums: per unit, float_canonical.h's
// f16_dot_canonical or bf16_pairs_dot_canonical (16 lanes from zero, then
// the tree), y = (accumulate ? y : 0) + that.
void vec_dot_groups_canonical(QuantType type, int64_t n, const void* w, size_t group_stride, int n_groups,
                              const void* x, size_t x_stride, int n_cols, float* y, size_t y_stride,
                              int64_t unit_n = 0, size_t unit_stride = 0, bool accumulate = false);

}  // namespace tessera
