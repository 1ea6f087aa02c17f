// In-place numerically stable softmax over x[0, n).
#pragma once

#include <cstdint>

namespace tessera {

void softmax(float* x, int64_t n);

}  // namespace tessera
