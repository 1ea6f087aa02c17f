// SwiGLU, the Llama FFN gate: gate[i] = silu(gate[i]) * up[i], in place.
// swiglu runs the best SIMD target of this CPU (activation_hwy.cpp);
// swiglu_scalar is its reference.
#pragma once

#include <cstdint>

namespace tessera {

void swiglu(float* gate, const float* up, int64_t n);
void swiglu_scalar(float* gate, const float* up, int64_t n);

}  // namespace tessera
