#include "ops/matmul.h"

#include "ops/fixed_sum.h"
#include "ops/quant_blocks.h"
#include "ops/row_groups.h"
#include "util/error.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace tessera {

namespace {
// A block of weight rows stays in L1/L2 while it meets every block of
// positions; a block of positions' activations (a few KiB each) stays in L2.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenBlock = 64;
constexpr size_t kMaxJobs = kMatmulManyMaxJobs;

// What dot_tile needs to know of a matrix and its activation, worked out once
// per product rather than once per tile (a token makes tens of thousands).
struct TileSource {
    const QuantTraits* traits;
    const Matrix* w;
    GroupPanels panels;      // grouped matrices: where each group's columns are
    int64_t w_block;         // elements per weight block
    uint64_t w_block_bytes;  // a block's bytes in a row
    int64_t x_block;         // elements per activation block
    uint64_t x_block_bytes;
    float scale;             // every dot product's factor (MatmulJob)
};

TileSource tile_source(const QuantTraits& traits, const Matrix& w, const QuantizedActivation& x, float scale) {
    const QuantLayout& wl = layout_of(w.type);
    const QuantLayout& xl = layout_of(x.type());
    if (w.grouped && traits.vec_dot_groups == nullptr) {
        throw make_error("internal: grouped weights without a grouped kernel");
    }
    GroupPanels panels{w.type, w.cols, w.cols, 0};
    if (w.grouped) {
        panels.panel_cols = w.panel_cols > 0 ? w.panel_cols : w.cols;
        panels.n_groups = (w.rows + kGroupRows - 1) / kGroupRows;
        if (panels.panel_cols % wl.block_size != 0) {
            throw make_error("internal: panels of {} columns of {}", panels.panel_cols, quant_type_name(w.type));
        }
    }
    return {&traits, &w, panels, wl.block_size, wl.block_bytes, xl.block_size, xl.block_bytes, w.out_scale * scale};
}

// A thread's chunk starts cold: the hardware prefetcher has to find the new
// stream, and a grouped kernel's own prefetch runs far_prefetch_bytes ahead
// of its loads, not at them. Ask for the chunk's first bytes at once, so its
// first blocks do not wait for memory a line at a time (a token's products
// are cut into a few dozen chunks each).
void prefetch_chunk(const TileSource& s, int64_t row, int64_t col, int64_t n_rows) {
    const Matrix& w = *s.w;
    if (!w.grouped) return;  // row kernels prefetch their own tiles ahead
    const int64_t first = row - w.row_begin;
    const uint8_t* p = w.data + s.panels.at(first / kGroupRows, col);
    const auto groups = static_cast<uint64_t>((first % kGroupRows + n_rows + kGroupRows - 1) / kGroupRows);
    const uint64_t group = s.panels.group_bytes(s.panels.panel_of(col));
    prefetch_stream_start(p, static_cast<int64_t>(groups * group), near_prefetch(w.type));
}

// Groups [g0, g0 + n_groups) of a grouped matrix over columns [col, col + n)
// (block boundaries; units of unit_n from col, as vec_dot_groups takes
// them): one kernel call per panel the columns cross, each resuming the
// sums the one before left in y (a unit or a whole row cut by a panel
// boundary), so the panels give the same bits as one pass. Before each
// panel but the last, the start of the next one is prefetched: a thread
// jumps there from the end of its run in this one.
void groups_by_panel(const TileSource& s, int64_t g0, int n_groups, int64_t col, int64_t n, const uint8_t* xr,
                     const QuantizedActivation& x, const int32_t* sums, int n_cols, float* y, size_t y_stride,
                     int64_t unit_n, size_t unit_stride) {
    const GroupPanels& panels = s.panels;
    const Matrix& w = *s.w;
    if (unit_n <= 0 || unit_n > n) unit_n = n;
    for (int64_t c = col; c < col + n;) {
        const int64_t p = panels.panel_of(c);
        const int64_t panel_end = std::min(col + n, (p + 1) * panels.panel_cols);
        const int64_t offset = c - col;  // from the call's first column
        const int64_t unit = offset / unit_n;
        // A unit cut by the boundary before: resumed alone, up to its end.
        const bool resume = offset % unit_n != 0;
        const int64_t stop = resume ? std::min(panel_end, col + (unit + 1) * unit_n) : panel_end;
        if (stop < col + n && panels.panel_of(stop) != p) {
            const uint64_t next = panels.group_bytes(p + 1);
            prefetch_stream_start(w.data + panels.at(g0, stop), static_cast<int64_t>(next * n_groups), near_prefetch(w.type));
        }
        s.traits->vec_dot_groups(stop - c, w.data + panels.at(g0, c), panels.group_bytes(p), n_groups,
                                 xr + static_cast<uint64_t>(offset / s.x_block) * s.x_block_bytes, x.row_bytes(),
                                 sums == nullptr ? nullptr : sums + offset / kQ8_0Block,
                                 static_cast<size_t>(x.sums_stride()), n_cols,
                                 y + static_cast<size_t>(unit) * unit_stride, y_stride, resume ? 0 : unit_n,
                                 unit_stride, resume);
        c = stop;
    }
}

// y[r] = (first ? 0 : y[r]) + sum over u < units of snap_to_grid(dots[u *
// unit_stride + r]): the sums are exact, so one pass over the rows adds every
// unit in any order and gives the same bits as a pass per unit. Eight rows at
// a time in vector lanes (GCC's vector extensions, one clone per instruction
// set): written as scalar code, the clamp's compares stayed branches, ~1 ns
// per value, a sixth of a column-split product's time with 8 units.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void add_unit_sums(const float* dots, size_t unit_stride, int64_t units, int rows, bool first, double* y) {
    using F8 = float __attribute__((vector_size(32)));
    using D8 = double __attribute__((vector_size(64)));
    constexpr int kLanes = 8;
    const D8 lo = D8{} - kGridLimit, hi = D8{} + kGridLimit, snap = D8{} + kGridSnap;
    int r = 0;
    for (; r + kLanes <= rows; r += kLanes) {
        D8 s{};
        if (!first) std::memcpy(&s, y + r, sizeof(s));
        for (int64_t u = 0; u < units; ++u) {
            F8 f;
            std::memcpy(&f, dots + u * unit_stride + r, sizeof(f));
            D8 d = __builtin_convertvector(f, D8);
            d = d < lo ? lo : d;  // snap_to_grid, lane by lane
            d = d > hi ? hi : d;
            s += (d + snap) - snap;
        }
        std::memcpy(y + r, &s, sizeof(s));
    }
    for (; r < rows; ++r) {
        double s = first ? 0.0 : y[r];
        for (int64_t u = 0; u < units; ++u) s += snap_to_grid(dots[u * unit_stride + r]);
        y[r] = s;
    }
}

struct PreparedJob {
    TileSource source;
    int64_t row0;  // the rect's first row (of the whole tensor)
    int64_t col0;  // the rect's first column among those w holds
    int64_t n_rows;
    int64_t first_block;  // index of its first row block among all jobs' blocks
    float* y;
    int64_t y_stride;
};

// A finished tile's dot products times the product's factor (NVFP4's
// per-tensor or per-expert scale), each unit's before it is snapped.
void scale_tile(const TileSource& s, int n_rows, int n_cols, float* y, size_t y_stride, int64_t units,
                size_t unit_stride) {
    if (s.scale == 1.0f) return;
    for (int64_t u = 0; u < units; ++u) {
        for (int c = 0; c < n_cols; ++c) {
            float* row = y + static_cast<size_t>(u) * unit_stride + static_cast<size_t>(c) * y_stride;
            for (int i = 0; i < n_rows; ++i) row[i] *= s.scale;
        }
    }
}

// y[c * y_stride + i] = dot(row `row + i` of w over the columns [col, col + n)
// it holds, x's row t0 + c from its element x_col on) for i < n_rows and
// c < n_cols (n_cols <= kTokenBlock): one tile in whichever layout w has.
// With 0 < unit_n < n, the columns are cut into units of unit_n and unit u's
// tile goes to y + u * unit_stride.
void dot_tile(const TileSource& s, int64_t row, int n_rows, int64_t col, int64_t n, const QuantizedActivation& x,
              int64_t t0, int n_cols, int64_t x_col, float* y, size_t y_stride, int64_t unit_n = 0,
              size_t unit_stride = 0) {
    const Matrix& w = *s.w;
    if (unit_n <= 0 || unit_n >= n) unit_n = n;
    const bool whole_groups = w.grouped && (row - w.row_begin) % kGroupRows == 0 && n_rows % kGroupRows == 0;
    if (unit_n < n && !whole_groups) {
        // Only whole groups have a kernel for all units at once.
        for (int64_t u0 = 0, u = 0; u0 < n; u0 += unit_n, ++u) {
            dot_tile(s, row, n_rows, col + u0, std::min(unit_n, n - u0), x, t0, n_cols, x_col + u0,
                     y + static_cast<size_t>(u) * unit_stride, y_stride);
        }
        return;
    }
    const uint8_t* xr = x.row(t0) + static_cast<uint64_t>(x_col / s.x_block) * s.x_block_bytes;
    if (!w.grouped) {
        const uint64_t col_offset = static_cast<uint64_t>(col / s.w_block) * s.w_block_bytes;
        s.traits->vec_dot_tile(n, w.row(row) + col_offset, w.row_bytes, n_rows, xr, x.row_bytes(), n_cols, y,
                               y_stride);
        scale_tile(s, n_rows, n_cols, y, y_stride, 1, 0);
        return;
    }
    // Q8_0 activations carry block sums (Q8_K ones have their own bsums).
    const int32_t* sums = x.type() == QuantType::Q8_0 ? x.block_sums(t0) + x_col / kQ8_0Block : nullptr;
    const int64_t first = row - w.row_begin;
    if (whole_groups) {
        groups_by_panel(s, first / kGroupRows, n_rows / kGroupRows, col, n, xr, x, sums, n_cols, y, y_stride,
                        unit_n, unit_stride);
        scale_tile(s, n_rows, n_cols, y, y_stride, (n + unit_n - 1) / unit_n, unit_stride);
        return;
    }
    // Rows that start or end inside a group: the whole group into `whole`,
    // then the rows asked for.
    float whole[kGroupRows * kTokenBlock];
    for (int64_t g = first / kGroupRows; g * kGroupRows < first + n_rows; ++g) {
        groups_by_panel(s, g, 1, col, n, xr, x, sums, n_cols, whole, kGroupRows, n, 0);
        const int64_t lo = std::max(first, g * kGroupRows), hi = std::min(first + n_rows, (g + 1) * kGroupRows);
        for (int c = 0; c < n_cols; ++c) {
            for (int64_t r = lo; r < hi; ++r) y[c * y_stride + (r - first)] = whole[c * kGroupRows + r - g * kGroupRows];
        }
    }
    scale_tile(s, n_rows, n_cols, y, y_stride, 1, 0);
}

// Rows [r0, r0 + rows) of one job against every position of x.
void run_block(const PreparedJob& job, int64_t r0, int64_t rows, const QuantizedActivation& x, int64_t n_cols) {
    const int64_t n_tok = x.n_rows();
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokenBlock) {
        const int toks = static_cast<int>(std::min(kTokenBlock, n_tok - t0));
        dot_tile(job.source, job.row0 + r0, static_cast<int>(rows), job.col0, n_cols, x, t0, toks, 0,
                 job.y + t0 * job.y_stride + r0, static_cast<size_t>(job.y_stride));
    }
}
}  // namespace

void matmul_many(std::span<const MatmulJob> jobs, const QuantizedActivation& x, ThreadPool& pool) {
    if (jobs.size() > kMaxJobs) throw make_error("internal: {} products in one matmul_many", jobs.size());
    std::array<PreparedJob, kMaxJobs> prepared;
    int64_t n_blocks = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatmulJob& job = jobs[i];
        const QuantTraits& traits = require_weight_traits(job.w->type, "matmul");
        check_activation(traits, job.rect, x);
        if (job.rect.n_cols != jobs[0].rect.n_cols) throw make_error("internal: matmul_many over different widths");
        const int64_t n_rows = job.rect.row_end - job.rect.row_begin;
        rect_col_offset(*job.w, job.rect);  // checks the rect
        prepared[i] = {tile_source(traits, *job.w, x, job.scale), job.rect.row_begin, job.rect.col_begin - job.w->col_begin,
                       n_rows, n_blocks, job.y, job.y_stride};
        n_blocks += (n_rows + kRowBlock - 1) / kRowBlock;
    }
    const int64_t n_cols = jobs.empty() ? 0 : jobs[0].rect.n_cols;
    const size_t n_jobs = jobs.size();
    // Contiguous runs of blocks per thread, so each streams its rows in order.
    // Positions that fit one token block read each weight once whatever the
    // row block, so a chunk's rows of a matrix go to the kernel in one call
    // (a token's products made ~20 calls per 100 KiB of weights otherwise);
    // longer batches take a row block at a time, reused across token blocks.
    const bool whole_runs = x.n_rows() <= kTokenBlock;
    pool.parallel_for(n_blocks, [&](int64_t begin, int64_t end) {
        size_t j = 0;
        for (int64_t b = begin; b < end;) {
            while (j + 1 < n_jobs && prepared[j + 1].first_block <= b) ++j;
            const PreparedJob& job = prepared[j];
            const int64_t job_end = j + 1 < n_jobs ? prepared[j + 1].first_block : n_blocks;
            const int64_t stop = whole_runs ? std::min(end, job_end) : b + 1;
            const int64_t r0 = (b - job.first_block) * kRowBlock;
            const int64_t rows = std::min((stop - b) * kRowBlock, job.n_rows - r0);
            if (b == begin) prefetch_chunk(job.source, job.row0 + r0, job.col0, rows);
            // The next product of this chunk (an expert's gate after its up,
            // the next expert) starts cold as well: its first lines are asked
            // for now, so they arrive while this run streams.
            if (whole_runs && stop < end) {
                size_t next = j;
                while (next + 1 < n_jobs && prepared[next + 1].first_block <= stop) ++next;
                const PreparedJob& after = prepared[next];
                const int64_t after_r0 = (stop - after.first_block) * kRowBlock;
                const int64_t after_rows = std::min((end - stop) * kRowBlock, after.n_rows - after_r0);
                if (after_rows > 0) prefetch_chunk(after.source, after.row0 + after_r0, after.col0, after_rows);
            }
            run_block(job, r0, rows, x, n_cols);
            b = stop;
        }
    });
}

void matmul(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, float* y, int64_t y_stride,
            ThreadPool& pool) {
    const MatmulJob job{&w, rect, y, y_stride};
    matmul_many(std::span<const MatmulJob>(&job, 1), x, pool);
}

namespace {

// One column-split product prepared: rows `rect` of w against positions
// [t_begin, t_begin + n_tok) of x, its tiling fixed by the rect and n_tok.
struct UnitsProduct {
    const Matrix* w;
    MatRect rect;
    TileSource source;
    int64_t col0, n_rows, n_row_blocks, n_units, unit_cols;
    int64_t t_begin, n_tok;
    double* y;
    int64_t y_stride;
    int64_t toks_per_call, units_per_call, run_blocks;
    bool by_panel;
};

// Every unit's dot products of a run of row blocks and a block of positions
// are computed in one kernel call (grouped weights hold a group's units side
// by side, so the call streams them in memory order), then summed per row in
// unit order. A kernel call per unit and row block cost ~20% of wo's time in
// generation (4 units x 128 blocks).
// Tiles keep the shapes matmul uses (kTokenBlock positions; row kernels
// kRowBlock rows), whatever the split: a rank holding some of the units
// must compute each one bit for bit as a node holding all of them. A
// grouped kernel's rows do not depend on how many run at once, so grouped
// weights take longer runs of rows per call.
//
// Grouped weights in panels of whole units (ops/row_groups.h) take one
// panel at a time over a thread's whole chunk of rows, so each panel
// streams front to back; otherwise every unit of a run of rows at once.
constexpr int64_t kDots = 2048;

UnitsProduct prepare_units(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, int64_t t_begin,
                           int64_t n_tok, int64_t unit_cols, double* y, int64_t y_stride, float scale) {
    const QuantTraits& traits = require_weight_traits(w.type, "matmul");
    check_activation(traits, rect, x);
    if (unit_cols < 1 || rect.col_begin % unit_cols != 0) {
        throw make_error("internal: columns from {} are not split in units of {}", rect.col_begin, unit_cols);
    }
    if (t_begin < 0 || n_tok < 1 || t_begin + n_tok > x.n_rows()) {
        throw make_error("internal: positions [{}, {}) of an activation of {}", t_begin, t_begin + n_tok, x.n_rows());
    }
    rect_col_offset(w, rect);  // checks the rect
    UnitsProduct p{&w, rect, tile_source(traits, w, x, scale), rect.col_begin - w.col_begin, rect.row_end - rect.row_begin,
                   0, 0, unit_cols, t_begin, n_tok, y, y_stride, 0, 0, 0, false};
    if (unit_cols % p.source.w_block != 0 || unit_cols % p.source.x_block != 0) {
        throw make_error("internal: units of {} columns straddle {} blocks", unit_cols, quant_type_name(w.type));
    }
    p.n_row_blocks = (p.n_rows + kRowBlock - 1) / kRowBlock;
    p.n_units = (rect.n_cols + unit_cols - 1) / unit_cols;
    p.toks_per_call = std::min(kTokenBlock, n_tok);
    const int64_t panel_cols = p.source.panels.panel_cols;
    p.by_panel = w.grouped && n_tok <= kTokenBlock && panel_cols % unit_cols == 0 && p.col0 % panel_cols == 0 &&
                 panel_cols < rect.n_cols;
    p.units_per_call = std::min(p.by_panel ? panel_cols / unit_cols : p.n_units,
                                std::max<int64_t>(1, kDots / (p.toks_per_call * kRowBlock)));
    p.run_blocks = w.grouped ? std::max<int64_t>(1, kDots / (p.units_per_call * p.toks_per_call * kRowBlock)) : 1;
    return p;
}

// Row blocks [begin, end) of a prepared product (one thread's chunk).
void units_chunk(const UnitsProduct& p, const QuantizedActivation& x, int64_t begin, int64_t end) {
    float dots[kDots];  // [unit][token][row]
    const int64_t unit_cols = p.unit_cols;
    // Units [u0, u0 + units_per_call) of the rows of blocks [b, b + run_blocks).
    const auto unit_run = [&](int64_t b, int64_t u0) {
        const int64_t r0 = b * kRowBlock;
        const int rows = static_cast<int>(std::min(std::min(end, b + p.run_blocks) * kRowBlock, p.n_rows) - r0);
        const int64_t c = u0 * unit_cols;
        const int64_t span = std::min(p.units_per_call * unit_cols, p.rect.n_cols - c);
        const int64_t units = (span + unit_cols - 1) / unit_cols;
        for (int64_t t0 = 0; t0 < p.n_tok; t0 += p.toks_per_call) {
            const int toks = static_cast<int>(std::min(p.toks_per_call, p.n_tok - t0));
            const auto unit_stride = static_cast<size_t>(toks) * rows;
            dot_tile(p.source, p.rect.row_begin + r0, rows, p.col0 + c, span, x, p.t_begin + t0, toks, c, dots,
                     static_cast<size_t>(rows), unit_cols, unit_stride);
            for (int t = 0; t < toks; ++t) {
                add_unit_sums(dots + static_cast<size_t>(t) * rows, unit_stride, units, rows, u0 == 0,
                              p.y + (t0 + t) * p.y_stride + r0);
            }
        }
    };
    const int64_t chunk_rows = std::min(end * kRowBlock, p.n_rows) - begin * kRowBlock;
    if (p.by_panel) {
        for (int64_t u0 = 0; u0 < p.n_units; u0 += p.units_per_call) {
            prefetch_chunk(p.source, p.rect.row_begin + begin * kRowBlock, p.col0 + u0 * unit_cols, chunk_rows);
            for (int64_t b = begin; b < end; b += p.run_blocks) unit_run(b, u0);
        }
        return;
    }
    prefetch_chunk(p.source, p.rect.row_begin + begin * kRowBlock, p.col0, chunk_rows);
    for (int64_t b = begin; b < end; b += p.run_blocks) {
        for (int64_t u0 = 0; u0 < p.n_units; u0 += p.units_per_call) unit_run(b, u0);
    }
}

}  // namespace

void matmul_units(const Matrix& w, const MatRect& rect, const QuantizedActivation& x, int64_t unit_cols, double* y,
                  int64_t y_stride, ThreadPool& pool, float scale) {
    const UnitsProduct p = prepare_units(w, rect, x, 0, x.n_rows(), unit_cols, y, y_stride, scale);
    pool.parallel_for(p.n_row_blocks, [&](int64_t begin, int64_t end) { units_chunk(p, x, begin, end); });
}

void matmul_units_many(const Matrix& w, std::span<const UnitsJob> jobs, const QuantizedActivation& x,
                       int64_t unit_cols, ThreadPool& pool) {
    if (jobs.size() > kMatmulManyMaxJobs) throw make_error("internal: {} products in one matmul_units_many", jobs.size());
    std::array<UnitsProduct, kMatmulManyMaxJobs> products;
    std::array<int64_t, kMatmulManyMaxJobs + 1> first{};  // each product's first block in the joint range
    for (size_t i = 0; i < jobs.size(); ++i) {
        products[i] = prepare_units(w, jobs[i].rect, x, jobs[i].x_row, 1, unit_cols, jobs[i].y, 0, jobs[i].scale);
        first[i + 1] = first[i] + products[i].n_row_blocks;
    }
    // One parallel loop over every product's row blocks; a thread's chunk
    // cut where a product ends (a chunk's rows only change how many rows a
    // kernel call takes, never a row's bits).
    pool.parallel_for(first[jobs.size()], [&](int64_t begin, int64_t end) {
        for (size_t i = 0; i < jobs.size(); ++i) {
            const int64_t b0 = std::max(begin, first[i]), b1 = std::min(end, first[i + 1]);
            if (b0 >= b1) continue;
            // The next product's first lines, asked for while this one streams
            // (units_chunk's own start prefetch would wait for them).
            if (i + 1 < jobs.size() && b1 < end) {
                const UnitsProduct& after = products[i + 1];
                prefetch_chunk(after.source, after.rect.row_begin, after.col0,
                               std::min((end - b1) * kRowBlock, after.n_rows));
            }
            units_chunk(products[i], x, b0 - first[i], b1 - first[i]);
        }
    });
}

}  // namespace tessera
