// fma(a, b, c) rounded once, as the CPU's std::fma: Vulkan does not promise
// that GLSL's fma is fused (lavapipe splits it into a multiply and an add),
// so it is built from double arithmetic, which Vulkan rounds correctly:
// a * b is exact in a double (24 + 24 bits < 53), p + c is rounded to double
// with its exact error from TwoSum, and round-to-odd (the last bit set when
// the sum was inexact) makes the final rounding to float the single
// rounding of the exact a * b + c (Boldo and Melquiond: 53 >= 2 * 24 + 2).
// Needs the shaderFloat64 feature.
//
// A device whose own fma the probe found rounded once on every case
// (gpu/fma_probe.h: NVIDIA's and AMD's hardware FMA are) gets kNativeFma set
// at pipeline creation, and uses it: the same bits, without the doubles
// (FP64 runs at 1/32 to 1/64 of the float rate on consumer GPUs).
layout(constant_id = 0) const bool kNativeFma = false;

float exact_fma(float a, float b, float c) {
    if (kNativeFma) {
        precise float f = fma(a, b, c);
        return f;
    }
    precise double p = double(a) * double(b);
    precise double dc = double(c);
    precise double s = p + dc;
    precise double bv = s - p;
    precise double av = s - bv;
    precise double err = (p - av) + (dc - bv);
    if (err != 0.0) {
        uvec2 bits = unpackDouble2x32(s);  // (low word, high word)
        if ((bits.x & 1u) == 0u) {
            // Step one unit in the last place toward the exact value: up in
            // magnitude when the error has the sum's sign.
            const bool away = (err > 0.0) == (s > 0.0);
            if (away) {
                bits.x += 1u;  // the low bit was 0: no carry
            } else {
                if (bits.x == 0u) bits.y -= 1u;
                bits.x -= 1u;
            }
            s = packDouble2x32(bits);
        }
    }
    return float(s);
}
