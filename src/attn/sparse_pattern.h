// Which cached positions a query attends to under sparse attention (after
// ruvllm_sparse_attention, seed 001): the query at position i reads
//   - its local window, positions i - window .. i (window + 1 of them);
//   - the global tokens, the first `globals` positions (a BOS, a system
//     prompt's start);
//   - with log-stride, positions i - 2^k for k >= 0;
//   - with landmarks, block means: the mean K and V of a block of `block`
//     positions stand in for the block. kAll takes every complete block that
//     ends before the window starts, so nothing before the window is out of
//     reach (O(i / block) of them); kLog takes the seed's choice, the two
//     latest complete blocks and those 2^k blocks before the latest
//     (O(log i)), even where they overlap the window.
// Causal throughout. A query whose window reaches position 0 reads exactly
// what dense attention reads, unless kLog adds block means of positions the
// window already holds (the seed counts those twice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

enum class LandmarkMode { kOff, kAll, kLog };

struct SparseOptions {
    bool enabled = false;
    int window = 128;
    int block = 64;
    int globals = 1;
    bool log_stride = true;
    LandmarkMode landmarks = LandmarkMode::kAll;
    bool operator==(const SparseOptions&) const = default;
};

// Throws an Error naming the option that is out of range.
void validate(const SparseOptions& options);

// "sparse (window 128, block 64, 1 global, log-stride, landmarks all)" or "dense".
std::string describe(const SparseOptions& options);

const char* landmark_mode_name(LandmarkMode mode);

// One query's candidates: the window [window_begin, pos], the scattered
// positions before it (ascending, distinct), and the landmark blocks
// (ascending, distinct; block b covers positions [b * block, (b + 1) * block)).
struct SparseCandidates {
    int window_begin = 0;
    std::vector<int> tokens;
    std::vector<int> blocks;
};

// Whether the query at `pos` reads exactly positions 0 .. pos, as dense does.
bool sparse_is_dense_at(int pos, const SparseOptions& options);

// Fills `out` for the query at `pos` (reusing its vectors' storage).
void sparse_candidates(int pos, const SparseOptions& options, SparseCandidates& out);

// Query-key pairs of one head over a causal sequence of n positions
// (landmarks count one pair each): the sum over i < n of what
// sparse_candidates gives.
uint64_t sparse_pair_count(int64_t n, const SparseOptions& options);

}  // namespace tessera
