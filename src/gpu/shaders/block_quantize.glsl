// One block of 32 floats as ops/quant_scalar.cpp quantizes it, for the
// activations (Q8_0) and the KV caches (Q8_0, Q4_0): the scales divided and
// inverted with one rounding each (exact_math.glsl), the codes rounded as the
// CPU rounds them, the scale stored as a half (half.glsl).
#include "exact_math.glsl"
#include "half.glsl"

// q8_0_from_float: d = amax / 127, id = 1 / d, codes round(x * id) half away
// from zero. Returns the half's bits; codes in q.
uint q8_0_block(in float x[32], out int q[32]) {
    float amax = 0.0;
    for (int i = 0; i < 32; ++i) amax = max(amax, abs(x[i]));
    const float d = exact_div_f(amax, 127.0);
    const float id = d != 0.0 ? exact_recip_f(d) : 0.0;
    for (int i = 0; i < 32; ++i) {
        precise float v = x[i] * id;
        // Half away from zero, exactly (|v| <= 127.x: floor and the
        // difference are exact).
        const float m = abs(v);
        const float f = floor(m);
        precise float frac = m - f;
        const float r = frac >= 0.5 ? f + 1.0 : f;
        q[i] = v < 0.0 ? -int(r) : int(r);
    }
    return f32_to_f16_bits(d);
}

// q4_0_from_float: d = max / -8 (max: the first element of the largest
// magnitude, with its sign), id = 1 / d, codes min(15, int(x * id + 8.5))
// (truncated toward zero, as the CPU's cast). Returns the half's bits; codes
// in q (0..15).
uint q4_0_block(in float x[32], out int q[32]) {
    float amax = 0.0, mx = 0.0;
    for (int i = 0; i < 32; ++i) {
        if (abs(x[i]) > amax) {
            amax = abs(x[i]);
            mx = x[i];
        }
    }
    precise float d = mx * -0.125;  // / -8: exact
    const float id = d != 0.0 ? exact_recip_f(d) : 0.0;
    for (int i = 0; i < 32; ++i) {
        precise float scaled = x[i] * id;
        precise float shifted = scaled + 8.5;
        q[i] = min(15, int(shifted));
    }
    return f32_to_f16_bits(d);
}
