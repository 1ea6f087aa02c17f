// Highway's Tanh (hwy/contrib/math/math-inl.h) step for step, as it runs on
// targets with FMA (AVX2, AVX-512, NEON): the CPU's GELU (geglu) and soft
// caps use it. Expm1: q = trunc(fma(x, 1/ln 2, +-0.5)), r = x - q ln 2 in two
// fused steps, Highway's degree-5 Estrin polynomial, then 2^q in two
// multiplies; tanh(x) = sign(x) * y / (y + 2) with y = expm1(2|x|), 1 beyond
// 18.714973875. Each fma rounded once (exact_fma.glsl), the division once
// (exact_math.glsl). Needs exact_math.glsl.
float hwy_pow2i(int e) { return intBitsToFloat((e + 127) << 23); }

float hwy_expm1(float x) {
    const float half_ = x < 0.0 || (x == 0.0 && (floatBitsToUint(x) >> 31) != 0u) ? -0.5 : 0.5;
    const int q = int(exact_fma(x, 1.442695040888963407359924681, half_));  // toward zero, as cvttps
    const float qf = float(q);
    float r = exact_fma(qf, -0.693145751953125, x);
    r = exact_fma(qf, -1.428606765330187045e-6, r);
    precise float r2 = r * r;
    precise float r4 = r2 * r2;
    const float lo = exact_fma(r2, exact_fma(0.00833336077630519866943359, r, 0.0416664853692054748535156),
                               exact_fma(0.166666671633720397949219, r, 0.5));
    const float est = exact_fma(r4, exact_fma(0.000198527617612853646278381, r, 0.00139304355252534151077271), lo);
    const float y = exact_fma(est, r2, r);
    float z;
    if (abs(x) < 0.346573590279972654708616) {
        z = y;
    } else {
        precise float one_more = y + 1.0;
        const int h = q >> 1;
        precise float scaled = one_more * hwy_pow2i(h);
        precise float whole = scaled * hwy_pow2i(q - h);
        precise float less = whole - 1.0;
        z = less;
    }
    return x < -104.0 ? -1.0 : z;
}

float hwy_tanh(float x) {
    const uint sign = floatBitsToUint(x) & 0x80000000u;
    const float a = uintBitsToFloat(floatBitsToUint(x) ^ sign);
    precise float twice = a * 2.0;
    const float y = hwy_expm1(twice);
    precise float denominator = y + 2.0;
    const float z = a > 18.714973875 ? 1.0 : exact_div_f(y, denominator);
    return uintBitsToFloat(floatBitsToUint(z) ^ sign);
}
