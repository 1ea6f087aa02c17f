// Scalar reference of NVFP4, llama.cpp's type for NVIDIA's 4-bit floats
// (ggml's block_nvfp4, quant_blocks.h: 64 E2M1 codes in four sub-blocks of
// 16, each with a UE4M3 scale; 4.5 bits a weight), against Q8_0
// activations. The quantizer is llama.cpp's quantize_row_nvfp4_ref: the same
// bytes as ggml's. Files converted from ModelOpt checkpoints also carry a
// per-tensor factor (`<name>.scale`) that multiplies each product's result:
// model/weight_scales.h applies it, not the block step.
//
// The dot product runs in the canonical order (ops/row_groups.h), per Q8_0
// block h (h < 2, elements 32h..32h + 31) of an NVFP4 block:
//   s_lo = sum over sub-block 2h of v_i x_i, s_hi over sub-block 2h + 1
//          (exact integers, v the codes' doubled E2M1 values)
//   t    = d(2h) * float(s_lo);  t = fma(d(2h + 1), float(s_hi), t)
//   acc  = fma(d_x(h), t, acc)
#pragma once

#include "ops/quant_blocks.h"

#include <cstdint>

namespace tessera {

inline constexpr int kNvfp4Block = 64;

// The UE4M3 byte nearest x / 6's magnitude, as llama.cpp's ggml_fp32_to_ue4m3
// rounds it (x <= 0 or NaN: 0; clamped to 448).
uint8_t ue4m3_from_float(float x);

void nvfp4_to_float(const void* src, float* dst, int64_t n);
void nvfp4_from_float(const float* src, void* dst, int64_t n);
float nvfp4_vec_dot(int64_t n, const void* w, const void* x);
float nvfp4_block_step(const BlockNVFP4& w, const Q8_0x2& x, float acc);

}  // namespace tessera
