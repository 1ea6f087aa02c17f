#include "ops/quant_search.h"

#include <algorithm>
#include <cmath>

namespace tessera::quant_search {

int nearest_int(float x) { return static_cast<int>(std::nearbyint(x)); }

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        min = std::min(min, x[i]);
        max = std::max(max, x[i]);
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::fill(L, L + n, uint8_t{0});
        *the_min = -min;
        return 0.0f;
    }
    const auto error_of = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; ++i) {
        L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
        best_error += weights[i] * error_of(scale * L[i] + min - x[i]);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * static_cast<float>(l);
            sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
            sum_xl += w * static_cast<float>(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {  // the offset must not be positive: refit the scale alone
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0.0f;
            for (int i = 0; i < n; ++i) error += weights[i] * error_of(this_scale * Laux[i] + this_min - x[i]);
            if (error < best_error) {
                std::copy(Laux, Laux + n, L);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

namespace {

// The element of largest magnitude, with its sign, and that magnitude.
void signed_max(int n, const float* x, float* max, float* amax) {
    *max = 0.0f;
    *amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > *amax) {
            *amax = std::fabs(x[i]);
            *max = x[i];
        }
    }
}

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw) {
    float max, amax;
    signed_max(n, x, &max, &amax);
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, int8_t{0});
        return 0.0f;
    }
    const auto code = [nmax](float scaled) { return std::clamp(nearest_int(scaled), -nmax, nmax - 1); };
    // The largest element lands on -nmax, the side with one more code.
    float iscale = -static_cast<float>(nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = code(iscale * x[i]);
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = qw != nullptr ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = code(iscale * x[i]);
            const float w = qw != nullptr ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        // sumlx^2 / suml2 is the error reduction of the fitted scale; larger is better.
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + code(iscale * x[i]));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
    float max, amax;
    signed_max(n, x, &max, &amax);
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, int8_t{0});
        return 0.0f;
    }
    const float iscale = -static_cast<float>(nmax) / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // Move single codes while that raises sumlx^2 / suml2 (the fitted scale's gain).
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
            if (slx > 0) {
                float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
                const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * static_cast<float>(new_l);
                    sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

int best_index_int8(int n, const int8_t* values, float x) {
    if (x <= values[0]) return 0;
    if (x >= values[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < values[mid]) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return x - values[hi - 1] < values[hi] - x ? hi - 1 : hi;
}

}  // namespace tessera::quant_search

namespace tessera::quant_search {

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w) {
    float max = 0.0f;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (max < kGroupMaxEps) {
        std::fill(L, L + n, uint8_t{0});
        return 0.0f;
    }
    float iscale = static_cast<float>(nmax) / max;
    for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
    const float scale = 1.0f / iscale;
    float best_mse = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * static_cast<float>(L[i]);
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
        const float scale_is = 1.0f / iscale_is;
        float mse = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * static_cast<float>(l);
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        L[i] = static_cast<uint8_t>(l);
        sumlx += w[i] * x[i] * static_cast<float>(l);
        suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float li = static_cast<float>(L[i]);
            float slx = sumlx - w[i] * x[i] * li;
            float sl2 = suml2 - w[i] * li * li;
            if (slx > 0 && sl2 > 0) {
                const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w[i] * x[i] * static_cast<float>(new_l);
                    sl2 += w[i] * static_cast<float>(new_l) * static_cast<float>(new_l);
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<uint8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace tessera::quant_search
