// FFN gates and soft caps, elementwise and in place:
//   swiglu: gate[i] = silu(gate[i]) * up[i]          (Llama, Qwen, Mistral, Phi-3)
//   geglu:  gate[i] = gelu(gate[i]) * up[i]          (Gemma; GELU's tanh form, as ggml)
//   swiglu_oai: g = min(gate[i], 7), u = clamp(up[i], -7, 7),
//           gate[i] = g * sigmoid(1.702 g) * (u + 1)  (gpt-oss's clamped SwiGLU, as ggml's swiglu_oai)
//   soft_cap: x[i] = cap * tanh(x[i] / cap)          (Gemma 2's attention scores and logits)
// Each runs the best SIMD target of this CPU (activation_hwy.cpp); swiglu
// and swiglu_oai give the same bits on every target (canonical::exp), geglu and soft_cap on
// every target with FMA. The *_scalar functions are plain references (std::exp,
// std::tanh: close, not the same bits).
#pragma once

#include <cstdint>

namespace tessera {

enum class FfnActivation : uint8_t { kSilu, kGelu, kSwigluOai };

void swiglu(float* gate, const float* up, int64_t n);
void swiglu_scalar(float* gate, const float* up, int64_t n);
void geglu(float* gate, const float* up, int64_t n);
void geglu_scalar(float* gate, const float* up, int64_t n);
void swiglu_oai(float* gate, const float* up, int64_t n);
void swiglu_oai_scalar(float* gate, const float* up, int64_t n);
// The gate of `activation`.
void gated(FfnActivation activation, float* gate, const float* up, int64_t n);

void soft_cap(float* x, int64_t n, float cap);
void soft_cap_scalar(float* x, int64_t n, float cap);

}  // namespace tessera
