// The order a sampler walks a vocabulary in: logits from highest to lowest,
// equal logits by token id. Sampling without top-k (the OpenAI API's default)
// orders the whole vocabulary every token, and a comparison sort of 150-200k
// tokens (Qwen 3, gpt-oss) took ~20 ms on a 2-vCPU machine, a large share of a
// token's time. A radix sort gives the same order in a few linear passes.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

// The ids of x[0, n) whose logit is above -inf (NaN and -inf left out: a
// refused token never enters), highest logit first, equal logits (+0 and -0
// equal) by ascending id. `scratch` is reused between calls.
void order_by_logit(const float* x, int32_t n, std::vector<int32_t>& ids, std::vector<uint64_t>& scratch);

// The reference: the same order by a comparison sort.
void order_by_logit_reference(const float* x, int32_t n, std::vector<int32_t>& ids);

}  // namespace tessera
