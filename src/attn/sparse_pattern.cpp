#include "attn/sparse_pattern.h"

#include "util/error.h"

#include <algorithm>
#include <fmt/format.h>

namespace tessera {

void validate(const SparseOptions& o) {
    if (!o.enabled) return;
    if (o.window < 1 || o.window > (1 << 24)) throw make_error("--sparse-window must be 1 .. 16777216 (got {})", o.window);
    if (o.block < 1 || o.block > (1 << 20)) throw make_error("--sparse-block must be 1 .. 1048576 (got {})", o.block);
    if (o.globals < 0 || o.globals > (1 << 20)) throw make_error("--sparse-globals must be 0 .. 1048576 (got {})", o.globals);
}

const char* landmark_mode_name(LandmarkMode mode) {
    switch (mode) {
        case LandmarkMode::kOff: return "off";
        case LandmarkMode::kAll: return "all";
        case LandmarkMode::kLog: return "log";
    }
    return "?";
}

std::string describe(const SparseOptions& o) {
    if (!o.enabled) return "dense";
    return fmt::format("sparse (window {}, block {}, {} global{}, log-stride {}, landmarks {})", o.window, o.block,
                       o.globals, o.globals == 1 ? "" : "s", o.log_stride ? "on" : "off", landmark_mode_name(o.landmarks));
}

bool sparse_is_dense_at(int pos, const SparseOptions& o) {
    return !o.enabled || (pos <= o.window && (o.landmarks != LandmarkMode::kLog || pos + 1 < o.block));
}

void sparse_candidates(int pos, const SparseOptions& o, SparseCandidates& out) {
    out.tokens.clear();
    out.blocks.clear();
    out.window_begin = std::max(0, pos - o.window);
    const int begin = out.window_begin;
    for (int g = 0; g < std::min(o.globals, begin); ++g) out.tokens.push_back(g);
    if (o.log_stride) {
        // Strides reach below the window only once 2^k > window.
        for (int64_t stride = 1; stride <= pos; stride *= 2) {
            const auto j = static_cast<int>(pos - stride);
            if (j < begin && j >= o.globals) out.tokens.push_back(j);
        }
    }
    std::sort(out.tokens.begin(), out.tokens.end());
    if (o.landmarks == LandmarkMode::kAll) {
        for (int b = 0; (static_cast<int64_t>(b) + 1) * o.block <= begin; ++b) out.blocks.push_back(b);
    } else if (o.landmarks == LandmarkMode::kLog) {
        const int complete = (pos + 1) / o.block;
        if (complete > 0) {
            const int pivot = complete - 1;
            if (pivot >= 1) out.blocks.push_back(pivot - 1);
            out.blocks.push_back(pivot);
            for (int64_t stride = 2; stride <= pivot; stride *= 2) out.blocks.push_back(static_cast<int>(pivot - stride));
            std::sort(out.blocks.begin(), out.blocks.end());
            out.blocks.erase(std::unique(out.blocks.begin(), out.blocks.end()), out.blocks.end());
        }
    }
}

uint64_t sparse_pair_count(int64_t n, const SparseOptions& o) {
    uint64_t total = 0;
    SparseCandidates c;
    for (int64_t i = 0; i < n; ++i) {
        sparse_candidates(static_cast<int>(i), o, c);
        total += static_cast<uint64_t>(i - c.window_begin + 1) + c.tokens.size() + c.blocks.size();
    }
    return total;
}

}  // namespace tessera
