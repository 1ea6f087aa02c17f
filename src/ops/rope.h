// Rotary position embedding in the GGUF "llama" layout: adjacent pairs
// (x[2i], x[2i+1]) of the first n_rot elements of each head are rotated by
// pos * base^(-2i / n_rot) (divided by an optional per-pair frequency factor,
// as Llama 3.1's rope_freqs tensor gives). llama2.c checkpoints use the same
// layout, so they convert without permuting wq/wk.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

class RopeTable {
public:
    RopeTable(int n_rot, float freq_base, std::vector<float> freq_factors = {});

    // Fills the cos/sin of every pair for position `pos` (every layer of a
    // token asks for the same one: only a new position computes them).
    void set_position(int64_t pos);

    // Rotates n_heads heads of head_dim elements each, stored back to back.
    void apply(float* x, int n_heads, int head_dim) const;

    int n_rot() const { return n_rot_; }

private:
    int n_rot_;
    int64_t pos_ = -1;
    std::vector<double> inv_freq_;
    std::vector<float> cos_;
    std::vector<float> sin_;
};

}  // namespace tessera
