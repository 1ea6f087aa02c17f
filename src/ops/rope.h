// Rotary position embedding: pair i of the first n_rot elements of each head
// is rotated by pos * scale * base^(-2i / n_rot) (divided by an optional
// per-pair frequency factor, as Llama 3.1's rope_freqs tensor gives; scale is
// linear rope scaling's 1 / factor). The pairs are laid out one of two ways:
//   kAdjacent: (x[2i], x[2i+1]), the GGUF "llama" layout (llama.cpp's
//     converter permutes Llama's wq/wk into it; llama2.c checkpoints use it
//     as they are);
//   kHalves: (x[i], x[i + n_rot/2]), the Hugging Face layout that Qwen,
//     Gemma and Phi-3 files keep (llama.cpp's NEOX rope).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

enum class RopeLayout : uint8_t { kAdjacent, kHalves };

// YaRN's context extension (gpt-oss), as ggml's rope computes it: with
// freq_scale = 1 / factor, pair i's angle blends the interpolated (scaled)
// and the original angle by a ramp over the pairs between the correction
// dims of beta_fast and beta_slow (orig_ctx: the trained context), and every
// cos/sin is multiplied by attn_factor * (1 + 0.1 ln(factor)). Off when
// orig_ctx is 0.
struct RopeYarn {
    int orig_ctx = 0;
    float ext_factor = 1.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
};

class RopeTable {
public:
    RopeTable(int n_rot, float freq_base, std::vector<float> freq_factors = {},
              RopeLayout layout = RopeLayout::kAdjacent, float freq_scale = 1.0f, const RopeYarn& yarn = {});

    // Fills the cos/sin of every pair for position `pos` (every layer of a
    // token asks for the same one: only a new position computes them).
    void set_position(int64_t pos);

    // Rotates n_heads heads of head_dim elements each, stored back to back.
    void apply(float* x, int n_heads, int head_dim) const;

    int n_rot() const { return n_rot_; }
    RopeLayout layout() const { return layout_; }
    // The current position's cos and sin of each pair (n_rot / 2 each): what
    // apply multiplies by, for a device that rotates with the same numbers.
    const std::vector<float>& cos_table() const { return cos_; }
    const std::vector<float>& sin_table() const { return sin_; }

private:
    int n_rot_;
    RopeLayout layout_;
    int64_t pos_ = INT64_MIN;  // none yet (every position, negative ones too, is a rotation)
    std::vector<double> inv_freq_;
    float magnitude_ = 1.0f;  // YaRN's cos/sin factor
    std::vector<float> cos_;
    std::vector<float> sin_;
};

}  // namespace tessera
