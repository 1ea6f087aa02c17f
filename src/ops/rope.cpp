#include "ops/rope.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

// The pair index (fractional) at which a rotation completes `rotations` turns
// over the trained context (ggml_rope_yarn_corr_dim).
double yarn_corr_dim(int n_rot, int orig_ctx, float rotations, float base) {
    return n_rot * std::log(orig_ctx / (rotations * 2.0 * 3.14159265358979323846)) / (2.0 * std::log(base));
}

}  // namespace

RopeTable::RopeTable(int n_rot, float freq_base, std::vector<float> freq_factors, RopeLayout layout, float freq_scale,
                     const RopeYarn& yarn)
    : n_rot_(n_rot), layout_(layout), inv_freq_(static_cast<size_t>(n_rot / 2)), cos_(inv_freq_.size()), sin_(inv_freq_.size()) {
    if (n_rot <= 0 || n_rot % 2 != 0) throw make_error("rope dimension count must be even and positive (got {})", n_rot);
    if (!freq_factors.empty() && freq_factors.size() != inv_freq_.size()) {
        throw make_error("rope_freqs has {} factors but the rope needs {}", freq_factors.size(), inv_freq_.size());
    }
    double low = 0.0, high = 0.0;
    if (yarn.orig_ctx > 0) {
        low = std::max(0.0, std::floor(yarn_corr_dim(n_rot, yarn.orig_ctx, yarn.beta_fast, freq_base)));
        high = std::min(static_cast<double>(n_rot - 1), std::ceil(yarn_corr_dim(n_rot, yarn.orig_ctx, yarn.beta_slow, freq_base)));
        if (yarn.ext_factor != 0.0f) {
            magnitude_ = yarn.attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale));
        } else {
            magnitude_ = yarn.attn_factor;
        }
    }
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
        double f = std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / n_rot);
        if (!freq_factors.empty()) f /= freq_factors[i];
        double scale = freq_scale;
        if (yarn.orig_ctx > 0 && yarn.ext_factor != 0.0f) {
            // The ramp: 1 below `low` (the original angle), 0 above `high` (the scaled one).
            const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
            const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * yarn.ext_factor;
            scale = freq_scale * (1.0 - mix) + mix;
        }
        inv_freq_[i] = f * scale;
    }
}

void RopeTable::set_position(int64_t pos) {
    if (pos == pos_) return;
    pos_ = pos;
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
        const double angle = static_cast<double>(pos) * inv_freq_[i];
        cos_[i] = static_cast<float>(std::cos(angle)) * magnitude_;
        sin_[i] = static_cast<float>(std::sin(angle)) * magnitude_;
    }
}

void RopeTable::apply(float* x, int n_heads, int head_dim) const {
    // Element pair i is (i * first_step, i * first_step + second): adjacent
    // or half the rotated width apart.
    const size_t first_step = layout_ == RopeLayout::kAdjacent ? 2 : 1;
    const size_t second = layout_ == RopeLayout::kAdjacent ? 1 : cos_.size();
    for (int h = 0; h < n_heads; ++h) {
        float* head = x + static_cast<int64_t>(h) * head_dim;
        for (size_t i = 0; i < cos_.size(); ++i) {
            float& a = head[i * first_step];
            float& b = head[i * first_step + second];
            const float a0 = a, b0 = b;
            a = a0 * cos_[i] - b0 * sin_[i];
            b = a0 * sin_[i] + b0 * cos_[i];
        }
    }
}

}  // namespace tessera
