// In-place numerically stable softmax over x[0, n). softmax runs the best SIMD
// target of this CPU (softmax_hwy.cpp); softmax_scalar is its reference.
#pragma once

#include <cstdint>

namespace tessera {

void softmax(float* x, int64_t n);
void softmax_scalar(float* x, int64_t n);

}  // namespace tessera
