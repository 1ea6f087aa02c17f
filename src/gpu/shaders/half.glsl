// util/fp16.h's fp32_to_fp16 in integer steps (round to nearest even,
// saturating to infinity, NaN kept quiet): GLSL's packHalf2x16 leaves the
// rounding to the implementation.
uint f32_to_f16_bits(float f) {
    const uint x = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a < 0x38800000u) {
        // Subnormal or zero: |f| * 2^24 is exact; roundEven is exact too.
        precise float scaled = uintBitsToFloat(a) * 16777216.0;
        return sign | uint(roundEven(scaled));
    }
    uint half_ = (a >> 13) - (112u << 10);
    const uint rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half_ & 1u) != 0u)) ++half_;
    return sign | half_;
}

float f16_bits_to_f32(uint h) { return unpackHalf2x16(h & 0xffffu).x; }
