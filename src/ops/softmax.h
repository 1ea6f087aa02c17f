// In-place numerically stable softmax over x[0, n). softmax runs the best SIMD
// target of this CPU (softmax_hwy.cpp), the same bits on every target;
// softmax_scalar is a plain reference (std::exp, a double sum: close, not the
// same bits).
#pragma once

#include <cstdint>

namespace tessera {

void softmax(float* x, int64_t n);
void softmax_scalar(float* x, int64_t n);

}  // namespace tessera
