// The scalar K-quant references (Q4_K, Q6_K, Q8_K): hand-built blocks decode
// to the values llama.cpp's layouts define (the packing is restated here
// independently, so a layout mistake fails), quantization error is bounded
// and ordered against Q4_0 / Q8_0, on-grid values round-trip exactly, and the
// integer dot products equal dequantize-then-float-dot on unaligned buffers.
#include "ops/kquant_blocks.h"
#include "ops/quant_traits.h"
#include "util/fp16.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

namespace {

std::vector<float> gaussian(int64_t n, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.next_normal();
    return v;
}

std::vector<float> decode(QuantType type, const void* src, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    scalar_traits(type)->to_float(src, y.data(), n);
    return y;
}

// Quantizes x into `type` and back; returns RMS(error) / RMS(x).
double relative_rms_error(QuantType type, const std::vector<float>& x) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(quant_row_bytes(type, n));
    scalar_traits(type)->from_float(x.data(), q.data(), n);
    const auto y = decode(type, q.data(), n);
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        err += (double{y[i]} - x[i]) * (double{y[i]} - x[i]);
        ref += double{x[i]} * x[i];
    }
    return std::sqrt(err / ref);
}

// Packs 8 six-bit scales and mins the way llama.cpp's quantize_row_q4_K does.
void pack_q4_k_scales(const uint8_t* sc, const uint8_t* m, uint8_t* packed) {
    std::memset(packed, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            packed[j] = sc[j];
            packed[j + 4] = m[j];
        } else {
            packed[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
            packed[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            packed[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
        }
    }
}

// A Q4_K block from codes q[256] (0..15) as the format defines it.
BlockQ4_K make_q4_k(float d, float dmin, const uint8_t* sc, const uint8_t* m, const uint8_t* q) {
    BlockQ4_K block{};
    block.d = fp32_to_fp16(d);
    block.dmin = fp32_to_fp16(dmin);
    pack_q4_k_scales(sc, m, block.scales);
    for (int g = 0; g < 4; ++g) {
        for (int l = 0; l < 32; ++l) block.qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
    }
    return block;
}

// A Q6_K block from codes q[256] (0..63), following dequantize_row_q6_K.
BlockQ6_K make_q6_k(float d, const int8_t* scales, const uint8_t* q) {
    BlockQ6_K block{};
    block.d = fp32_to_fp16(d);
    std::memcpy(block.scales, scales, 16);
    for (int n = 0; n < 2; ++n) {
        const uint8_t* qn = q + 128 * n;
        for (int l = 0; l < 32; ++l) {
            block.ql[64 * n + l] = static_cast<uint8_t>((qn[l] & 0xF) | ((qn[l + 64] & 0xF) << 4));
            block.ql[64 * n + l + 32] = static_cast<uint8_t>((qn[l + 32] & 0xF) | ((qn[l + 96] & 0xF) << 4));
            block.qh[32 * n + l] = static_cast<uint8_t>((qn[l] >> 4) | ((qn[l + 32] >> 4) << 2) | ((qn[l + 64] >> 4) << 4) |
                                                        ((qn[l + 96] >> 4) << 6));
        }
    }
    return block;
}

}  // namespace

TEST(KQuantScalar, TraitsAreRegistered) {
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
        const QuantTraits* t = scalar_traits(type);
        ASSERT_NE(t, nullptr) << quant_type_name(type);
        EXPECT_EQ(t->vec_dot_type, QuantType::Q8_K);
        EXPECT_NE(t->vec_dot, nullptr);
        EXPECT_NE(t->vec_dot_tile, nullptr);
    }
    const QuantTraits* q8k = scalar_traits(QuantType::Q8_K);
    ASSERT_NE(q8k, nullptr);
    EXPECT_EQ(q8k->vec_dot, nullptr);  // an activation type only
    EXPECT_NE(q8k->from_float, nullptr);
    EXPECT_EQ(quant_row_bytes(QuantType::Q8_K, 512), 584u);
}

// Hand-written bytes: sub-block 4's scale and min live in byte 8 (low 4 bits)
// and the top 2 bits of bytes 0 (scale) and 4 (min).
TEST(KQuantScalar, Q4_KDecodesHandWrittenBytes) {
    BlockQ4_K block{};
    block.d = fp32_to_fp16(0.5f);
    block.dmin = fp32_to_fp16(0.25f);
    block.scales[0] = 0x40 | 5;   // sc[0] = 5, high bits of sc[4] = 1
    block.scales[4] = 0x80 | 3;   // m[0] = 3, high bits of m[4] = 2
    block.scales[8] = 0x21;       // sc[4] low = 1, m[4] low = 2
    block.qs[0] = 0x97;           // element 0: 7 (sub-block 0), element 32: 9 (sub-block 1)
    block.qs[64] = 0x03;          // element 128: 3 (sub-block 4)
    const auto y = decode(QuantType::Q4_K, &block, 256);
    EXPECT_EQ(y[0], 0.5f * 5 * 7 - 0.25f * 3);
    EXPECT_EQ(y[32], 0.0f);                                  // sub-block 1: scale 0, min 0
    EXPECT_EQ(y[128], 0.5f * (16 + 1) * 3 - 0.25f * (32 + 2));
    EXPECT_EQ(y[129], -0.25f * (32 + 2));
    EXPECT_EQ(y[1], -0.25f * 3);
}

TEST(KQuantScalar, Q4_KDecodesEveryElementAsDefined) {
    const uint8_t sc[8] = {1, 2, 17, 40, 5, 50, 33, 63};
    const uint8_t m[8] = {0, 10, 20, 63, 17, 60, 1, 48};
    uint8_t q[256];
    for (int i = 0; i < 256; ++i) q[i] = static_cast<uint8_t>((i * 7 + i / 32) % 16);
    const float d = 0.125f, dmin = 0.0625f;
    const BlockQ4_K block = make_q4_k(d, dmin, sc, m, q);
    const auto y = decode(QuantType::Q4_K, &block, 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], d * sc[i / 32] * q[i] - dmin * m[i / 32]) << i;
}

TEST(KQuantScalar, Q6_KDecodesHandWrittenBytes) {
    BlockQ6_K block{};
    block.d = fp32_to_fp16(0.5f);
    for (int j = 0; j < 16; ++j) block.scales[j] = static_cast<int8_t>(j - 8);
    block.ql[0] = 0x21;        // elements 0 (low nibble) and 64 (high nibble)
    block.ql[32] = 0x43;       // elements 32 and 96
    block.qh[0] = 0xE4;        // 2 bits each: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
    block.ql[64] = 0x0F;       // element 128 (second half)
    block.qh[32] = 0x03;       // element 128's high bits
    const auto y = decode(QuantType::Q6_K, &block, 256);
    EXPECT_EQ(y[0], 0.5f * -8 * (1 - 32));
    EXPECT_EQ(y[32], 0.5f * -6 * ((3 | 1 << 4) - 32));
    EXPECT_EQ(y[64], 0.5f * -4 * ((2 | 2 << 4) - 32));
    EXPECT_EQ(y[96], 0.5f * -2 * ((4 | 3 << 4) - 32));
    EXPECT_EQ(y[128], 0.5f * 0 * (63 - 32));
    EXPECT_EQ(y[1], 0.5f * -8 * -32);
    EXPECT_EQ(y[255], 0.5f * 7 * -32);
}

TEST(KQuantScalar, Q6_KDecodesEveryElementAsDefined) {
    int8_t scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = static_cast<int8_t>(j * 17 - 128);
    uint8_t q[256];
    for (int i = 0; i < 256; ++i) q[i] = static_cast<uint8_t>((i * 5 + 3 + i / 64) % 64);
    const BlockQ6_K block = make_q6_k(0.25f, scales, q);
    const auto y = decode(QuantType::Q6_K, &block, 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.25f * scales[i / 16] * (q[i] - 32)) << i;
}

TEST(KQuantScalar, Q8_KQuantizesWithBsums) {
    for (float scale : {1.0f, 1e-3f, 300.0f}) {
        auto x = gaussian(3 * 256, 11);
        for (auto& v : x) v *= scale;
        std::vector<uint8_t> q(quant_row_bytes(QuantType::Q8_K, 768) + 5);
        scalar_traits(QuantType::Q8_K)->from_float(x.data(), q.data() + 5, 768);
        const auto y = decode(QuantType::Q8_K, q.data() + 5, 768);
        for (int b = 0; b < 3; ++b) {
            BlockQ8_K block;
            std::memcpy(&block, q.data() + 5 + b * sizeof(BlockQ8_K), sizeof block);
            // The extreme element maps to -127: |d| = amax / 127.
            float amax = 0.0f;
            for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
            EXPECT_NEAR(std::fabs(block.d), amax / 127.0f, 1e-6f * amax);
            for (int k = 0; k < 16; ++k) {
                int sum = 0;
                for (int l = 0; l < 16; ++l) {
                    ASSERT_GE(block.qs[16 * k + l], -127);
                    sum += block.qs[16 * k + l];
                }
                ASSERT_EQ(block.bsums[k], sum) << b << " " << k;
            }
            for (int i = 0; i < 256; ++i) {
                ASSERT_NEAR(y[b * 256 + i], x[b * 256 + i], 0.5001f * std::fabs(block.d)) << i;
            }
        }
    }
}

TEST(KQuantScalar, ZerosQuantizeToZeros) {
    const std::vector<float> x(512, 0.0f);
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_K}) {
        std::vector<uint8_t> q(quant_row_bytes(type, 512), 0xAB);
        scalar_traits(type)->from_float(x.data(), q.data(), 512);
        for (float v : decode(type, q.data(), 512)) ASSERT_EQ(v, 0.0f) << quant_type_name(type);
    }
}

// Error on Gaussian data, relative to RMS(x). The weight types must beat the
// legacy type of their bit width (Q4_K vs Q4_0) and Q6_K be ~4x better than
// Q4_K. Q8_K (one scale per 256, not per 32) is a little worse than Q8_0.
TEST(KQuantScalar, RoundTripErrorIsSmall) {
    const auto x = gaussian(64 * 256, 3);
    const double q4_k = relative_rms_error(QuantType::Q4_K, x);
    const double q6_k = relative_rms_error(QuantType::Q6_K, x);
    const double q8_k = relative_rms_error(QuantType::Q8_K, x);
    EXPECT_LT(q4_k, 0.085);
    EXPECT_LT(q6_k, 0.022);
    EXPECT_LT(q8_k, 0.008);
    EXPECT_LT(q4_k, relative_rms_error(QuantType::Q4_0, x));
    EXPECT_LT(q6_k, q4_k / 3.5);
    // A shifted distribution is what Q4_K's mins are for.
    auto shifted = x;
    for (auto& v : shifted) v = std::fabs(v) + 0.5f;
    EXPECT_LT(relative_rms_error(QuantType::Q4_K, shifted), 0.05);
}

// Values already on a type's grid come back unchanged.
TEST(KQuantScalar, OnGridValuesRoundTripExactly) {
    Rng rng(21);
    {  // Q8_K: integers times a power of two, the extreme at -127.
        std::vector<float> x(256);
        for (auto& v : x) v = 0.25f * static_cast<float>(static_cast<int>(rng.next_u64() % 255) - 127);
        x[77] = -127 * 0.25f;
        std::vector<uint8_t> q(quant_row_bytes(QuantType::Q8_K, 256));
        scalar_traits(QuantType::Q8_K)->from_float(x.data(), q.data(), 256);
        EXPECT_EQ(decode(QuantType::Q8_K, q.data(), 256), x);
    }
    {  // Q6_K: every sub-block s * (q - 32), q in 0..63, with one q = 0.
        int8_t scales[16];
        uint8_t codes[256];
        for (auto& s : scales) s = -128;
        for (auto& c : codes) c = static_cast<uint8_t>(rng.next_u64() % 64);
        for (int j = 0; j < 16; ++j) codes[16 * j + j] = 0;
        const BlockQ6_K block = make_q6_k(1.0f / 2048, scales, codes);
        const auto x = decode(QuantType::Q6_K, &block, 256);
        std::vector<uint8_t> q(sizeof(BlockQ6_K));
        scalar_traits(QuantType::Q6_K)->from_float(x.data(), q.data(), 256);
        EXPECT_EQ(decode(QuantType::Q6_K, q.data(), 256), x);
    }
    {  // Q4_K: every sub-block uses codes 0 and 15; the largest scale and min are 63.
        const uint8_t sc[8] = {63, 20, 33, 7, 50, 63, 12, 41};
        const uint8_t m[8] = {5, 63, 0, 30, 18, 44, 63, 9};
        uint8_t codes[256];
        for (auto& c : codes) c = static_cast<uint8_t>(rng.next_u64() % 16);
        for (int j = 0; j < 8; ++j) {
            codes[32 * j + 3] = 0;
            codes[32 * j + 20] = 15;
        }
        const BlockQ4_K block = make_q4_k(1.0f / 64, 1.0f / 128, sc, m, codes);
        const auto x = decode(QuantType::Q4_K, &block, 256);
        std::vector<uint8_t> q(sizeof(BlockQ4_K));
        scalar_traits(QuantType::Q4_K)->from_float(x.data(), q.data(), 256);
        EXPECT_EQ(decode(QuantType::Q4_K, q.data(), 256), x);
    }
}

// The integer dot products equal the float dot product of the decoded rows,
// for quantized Gaussian rows and for random bytes (every scale bit pattern),
// at every byte offset of both buffers.
TEST(KQuantScalar, VecDotMatchesDequantizedDot) {
    Rng rng(9);
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
        const QuantTraits& t = *scalar_traits(type);
        for (int64_t blocks : {1, 2, 3, 5, 8}) {
            const int64_t n = blocks * 256;
            for (size_t offset = 0; offset < 16; ++offset) {
                const bool raw = offset % 2 == 1;
                std::vector<uint8_t> w(offset + quant_row_bytes(type, n));
                if (raw) {
                    for (auto& b : w) b = static_cast<uint8_t>(rng.next_u64());
                    for (int64_t i = 0; i < blocks; ++i) {  // finite, moderate fp16 scales
                        uint8_t* block = w.data() + offset + i * quant_row_bytes(type, 256);
                        const uint16_t d = fp32_to_fp16(0.001f + 0.01f * rng.next_float());
                        const uint16_t dmin = fp32_to_fp16(0.001f + 0.01f * rng.next_float());
                        if (type == QuantType::Q4_K) {
                            std::memcpy(block, &d, 2);
                            std::memcpy(block + 2, &dmin, 2);
                        } else {
                            std::memcpy(block + 208, &d, 2);
                        }
                    }
                } else {
                    const auto v = gaussian(n, rng.next_u64());
                    t.from_float(v.data(), w.data() + offset, n);
                }
                const size_t x_offset = 15 - offset;
                const auto xf = gaussian(n, rng.next_u64());
                std::vector<uint8_t> x(x_offset + quant_row_bytes(QuantType::Q8_K, n));
                scalar_traits(QuantType::Q8_K)->from_float(xf.data(), x.data() + x_offset, n);

                const auto wd = decode(type, w.data() + offset, n);
                const auto xd = decode(QuantType::Q8_K, x.data() + x_offset, n);
                double want = 0.0, magnitude = 0.0;
                for (int64_t i = 0; i < n; ++i) {
                    want += double{wd[i]} * xd[i];
                    magnitude += std::fabs(double{wd[i]} * xd[i]);
                }
                const float got = t.vec_dot(n, w.data() + offset, x.data() + x_offset);
                ASSERT_NEAR(got, want, 1e-5 * magnitude + 1e-6)
                    << quant_type_name(type) << " n " << n << " offset " << offset << " raw " << raw;
                float tile = 0.0f;
                t.vec_dot_tile(n, w.data() + offset, 0, 1, x.data() + x_offset, 0, 1, &tile, 1);
                ASSERT_EQ(tile, got);
            }
        }
    }
}

}  // namespace tessera
