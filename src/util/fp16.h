// IEEE half <-> float conversion, scalar. This is the reference the SIMD
// kernels are tested against; it handles subnormals, infinities and NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera {

// A BF16 value (the high half of an F32) as the F32 it is, exactly.
inline float bf16_to_fp32(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t bits = 0;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {  // subnormal: renormalize
            int e = -1;
            do {
                ++e;
                mantissa <<= 1;
            } while ((mantissa & 0x400u) == 0);
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13;
        }
    } else if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | mantissa << 13;
    } else {
        bits = sign | (exponent + (127 - 15)) << 23 | mantissa << 13;
    }
    float f = 0.0f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Round-to-nearest-even, saturating to infinity like hardware F16C.
inline uint16_t fp32_to_fp16(float f) {
    uint32_t x = 0;
    std::memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
        return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past max half
    if (abs < 0x38800000u) {
        // Subnormal or zero: the half is |f| / 2^-24 rounded to nearest even.
        // Scaling by a power of two is exact, and nearbyint rounds to even in
        // the default rounding mode (a result of 1024 is the smallest normal).
        float magnitude = 0.0f;
        std::memcpy(&magnitude, &abs, sizeof magnitude);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f)));
    }
    uint32_t half = ((abs >> 13) - (112u << 10));
    const uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
}

}  // namespace tessera
