// Block structs of the K-quant formats, byte-for-byte as llama.cpp lays them
// out in GGUF files (QK_K = 256 elements per super-block). Kernels read them
// through memcpy, never through a cast, since rows may be unaligned.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int kQK_K = 256;

// Q4_K: 8 sub-blocks of 32. Sub-block j has a 6-bit scale sc[j] and 6-bit
// min m[j] packed in `scales` (see q4_k_scale_min); element value is
// d * sc[j] * q - dmin * m[j], q a 4-bit code. Per 64 elements, qs holds 32
// bytes: the low nibbles are the first 32 elements, the high nibbles the next.
struct BlockQ4_K {
    uint16_t d;     // fp16 super-block scale of the sub-block scales
    uint16_t dmin;  // fp16 super-block scale of the sub-block mins
    uint8_t scales[12];
    uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

// Q6_K: 16 sub-blocks of 16, value = d * scales[j] * (q - 32), q a 6-bit code
// split into 4 low bits (ql) and 2 high bits (qh); see q6_k_to_float.
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// Q8_K: the activation type K-quant weights are multiplied with. value =
// d * qs[i]; bsums[k] = sum of qs[16k .. 16k+15], so the constant parts of
// a weight block (Q4_K's mins, Q6_K's -32 offset) cost one product per 16.
struct BlockQ8_K {
    float d;  // fp32, not fp16
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");

// llama.cpp's get_scale_min_k4: the 6-bit scale and min of sub-block j of a
// Q4_K (or Q5_K) block. Bytes 0-3 hold scales 0-3 and bytes 4-7 mins 0-3 in
// their low 6 bits; bytes 8-11 hold the low 4 bits of scales 4-7 (low nibble)
// and mins 4-7 (high nibble), whose top 2 bits sit in the top 2 bits of bytes
// 0-3 (scales) and 4-7 (mins).
inline void q4_k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

}  // namespace tessera
