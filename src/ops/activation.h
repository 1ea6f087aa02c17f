// SwiGLU, the Llama FFN gate: gate[i] = silu(gate[i]) * up[i], in place.
#pragma once

#include <cstdint>

namespace tessera {

void swiglu(float* gate, const float* up, int64_t n);

}  // namespace tessera
