// Correctly rounded division and square root, as the CPU's IEEE operations
// give them: Vulkan allows a few units in the last place of error for both
// (in float and in double), so a candidate from the hardware is checked with
// exact arithmetic and moved to the right neighbour. Needs shaderFloat64.
#include "exact_fma.glsl"

// Splits a double into two halves whose products are exact (Veltkamp).
void split(double a, out double hi, out double lo) {
    precise double c = 134217729.0 * a;  // 2^27 + 1
    precise double big = c - a;
    hi = c - big;
    lo = a - hi;
}

// a * b = p + e exactly (Dekker's TwoProduct, without a fused fma).
void two_product(double a, double b, out double p, out double e) {
    precise double product = a * b;
    p = product;
    double ah, al, bh, bl;
    split(a, ah, al);
    split(b, bh, bl);
    precise double t = ((ah * bh - product) + ah * bl + al * bh) + al * bl;
    e = t;
}

// The next double toward +infinity / -infinity (finite, nonzero inputs).
double next_up(double x) {
    uvec2 b = unpackDouble2x32(x);
    if (x > 0.0) { b.x += 1u; if (b.x == 0u) b.y += 1u; }
    else { if (b.x == 0u) b.y -= 1u; b.x -= 1u; }
    return packDouble2x32(b);
}
double next_down(double x) { return -next_up(-x); }

// a / b rounded once to double (b > 0): the candidate's residual a - q b,
// exact from TwoProduct, says whether a neighbour is nearer.
double exact_div_d(double a, double b) {
    precise double q = a / b;
    for (int step = 0; step < 4; ++step) {
        double p, e;
        two_product(q, b, p, e);
        precise double r = (a - p) - e;  // a - q b: exact when q is near a / b
        // The nearer neighbour: compare |r| with half of ulp(q) * b.
        precise double up = next_up(q);
        precise double down = next_down(q);
        double pu, eu, pd, ed;
        two_product(up, b, pu, eu);
        two_product(down, b, pd, ed);
        precise double ru = (a - pu) - eu;
        precise double rd = (a - pd) - ed;
        if (abs(ru) < abs(r) || (abs(ru) == abs(r) && (unpackDouble2x32(up).x & 1u) == 0u)) { q = up; continue; }
        if (abs(rd) < abs(r) || (abs(rd) == abs(r) && (unpackDouble2x32(down).x & 1u) == 0u)) { q = down; continue; }
        break;
    }
    return q;
}

// The float nearest to a double (ties to even), without trusting the
// conversion's rounding mode: the candidate and its neighbours compared.
float nearest_float(double v) {
    float f = float(v);
    for (int step = 0; step < 2; ++step) {
        const float up = uintBitsToFloat(floatBitsToUint(f) + (f >= 0.0 ? 1u : -1u) * 1u);
        const float dn = uintBitsToFloat(floatBitsToUint(f) - (f >= 0.0 ? 1u : -1u) * 1u);
        precise double df = abs(double(f) - v), du = abs(double(up) - v), dd = abs(double(dn) - v);
        if (du < df || (du == df && (floatBitsToUint(up) & 1u) == 0u)) { f = up; continue; }
        if (dd < df || (dd == df && (floatBitsToUint(dn) & 1u) == 0u)) { f = dn; continue; }
        break;
    }
    return f;
}

// sqrt(a) rounded once to float (a >= 0): a candidate, then the squares of
// the midpoints to its neighbours (exact in double: 25-bit halves) say
// which float is nearest.
float exact_sqrt_f(float a) {
    if (a == 0.0) return a;
    float r = float(sqrt(double(a)));
    for (int step = 0; step < 3; ++step) {
        const float up = uintBitsToFloat(floatBitsToUint(r) + 1u);
        const float dn = uintBitsToFloat(floatBitsToUint(r) - 1u);
        precise double mu = (double(r) + double(up)) * 0.5;
        precise double md = (double(r) + double(dn)) * 0.5;
        if (mu * mu < double(a) || (mu * mu == double(a) && (floatBitsToUint(up) & 1u) == 0u)) { r = up; continue; }
        if (md * md > double(a) || (md * md == double(a) && (floatBitsToUint(dn) & 1u) == 0u)) { r = dn; continue; }
        break;
    }
    return r;
}

// 1 / a rounded once to float (a > 0): the exact quotient as a double
// would need rounding twice; instead the residual 1 - q a of each candidate
// (exact in double: 24 x 24 bits) picks the nearest.
float exact_recip_f(float a) {
    float q = float(1.0 / double(a));
    for (int step = 0; step < 3; ++step) {
        const float up = uintBitsToFloat(floatBitsToUint(q) + 1u);
        const float dn = uintBitsToFloat(floatBitsToUint(q) - 1u);
        precise double rq = abs(1.0 - double(q) * double(a));
        precise double ru = abs(1.0 - double(up) * double(a));
        precise double rd = abs(1.0 - double(dn) * double(a));
        if (ru < rq || (ru == rq && (floatBitsToUint(up) & 1u) == 0u)) { q = up; continue; }
        if (rd < rq || (rd == rq && (floatBitsToUint(dn) & 1u) == 0u)) { q = dn; continue; }
        break;
    }
    return q;
}

// a / b rounded once to float (finite, b nonzero): the quotient's candidates
// compared by their residuals a - q b, exact in double (a 48-bit product,
// then a difference of nearby values).
float exact_div_f(float a, float b) {
    float q = float(double(a) / double(b));
    if (q == 0.0 || isinf(q)) return q;
    for (int step = 0; step < 3; ++step) {
        const float up = uintBitsToFloat(floatBitsToUint(q) + 1u);
        const float dn = uintBitsToFloat(floatBitsToUint(q) - 1u);
        precise double rq = abs(double(a) - double(q) * double(b));
        precise double ru = abs(double(a) - double(up) * double(b));
        precise double rd = abs(double(a) - double(dn) * double(b));
        if (ru < rq || (ru == rq && (floatBitsToUint(up) & 1u) == 0u)) { q = up; continue; }
        if (rd < rq || (rd == rq && (floatBitsToUint(dn) & 1u) == 0u)) { q = dn; continue; }
        break;
    }
    return q;
}

// ops/canonical_math-inl.h's exp, step for step: n = round(x log2 e) (ties
// to even), r = x - n ln 2 in two fused steps, the degree-7 Taylor
// polynomial in Horner's fused steps, times 2^n through the exponent bits;
// x clamped to 88 above, 0 below -87. The constants are the CPU's floats, by
// their bits.
float canonical_exp(float x) {
    if (isnan(x)) return x;
    const float xc = min(x, 88.0);
    precise float scaled = xc * uintBitsToFloat(0x3FB8AA3Bu);
    const float n = roundEven(scaled);
    float r = exact_fma(-n, uintBitsToFloat(0x3F317200u), xc);
    r = exact_fma(-n, uintBitsToFloat(0x35BFBE8Eu), r);
    float p = uintBitsToFloat(0x39500D01u);          // 1/5040
    p = exact_fma(p, r, uintBitsToFloat(0x3AB60B61u));  // 1/720
    p = exact_fma(p, r, uintBitsToFloat(0x3C088889u));  // 1/120
    p = exact_fma(p, r, uintBitsToFloat(0x3D2AAAABu));  // 1/24
    p = exact_fma(p, r, uintBitsToFloat(0x3E2AAAABu));  // 1/6
    p = exact_fma(p, r, 0.5);
    p = exact_fma(p, r, 1.0);
    p = exact_fma(p, r, 1.0);
    const int ni = int(max(n, -126.0));
    const float scale = intBitsToFloat((ni + 127) << 23);
    precise float e = p * scale;
    return x < -87.0 ? 0.0 : e;
}
