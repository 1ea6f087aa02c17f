#include "ops/rope.h"

#include "util/error.h"

#include <cmath>

namespace tessera {

RopeTable::RopeTable(int n_rot, float freq_base, std::vector<float> freq_factors, RopeLayout layout, float freq_scale)
    : n_rot_(n_rot), layout_(layout), inv_freq_(static_cast<size_t>(n_rot / 2)), cos_(inv_freq_.size()), sin_(inv_freq_.size()) {
    if (n_rot <= 0 || n_rot % 2 != 0) throw make_error("rope dimension count must be even and positive (got {})", n_rot);
    if (!freq_factors.empty() && freq_factors.size() != inv_freq_.size()) {
        throw make_error("rope_freqs has {} factors but the rope needs {}", freq_factors.size(), inv_freq_.size());
    }
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
        double f = std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / n_rot);
        if (!freq_factors.empty()) f /= freq_factors[i];
        inv_freq_[i] = f * freq_scale;
    }
}

void RopeTable::set_position(int64_t pos) {
    if (pos == pos_) return;
    pos_ = pos;
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
        const double angle = static_cast<double>(pos) * inv_freq_[i];
        cos_[i] = static_cast<float>(std::cos(angle));
        sin_[i] = static_cast<float>(std::sin(angle));
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
