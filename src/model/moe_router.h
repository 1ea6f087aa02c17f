// A mixture of experts' router: from one token's router logits to the
// experts it goes to and their weights, as llama.cpp's build_moe_ffn computes
// them for each family's gating (model/architecture.h). The same bits on every
// CPU (softmax is canonical, ops/softmax.h; the rest is plain float code in a
// fixed order), so every rank of a plan and every node kind choose alike.
#pragma once

#include "model/architecture.h"

#include <cstdint>
#include <span>

namespace tessera {

struct ExpertChoice {
    int32_t expert = 0;
    float weight = 0.0f;
};

// Chooses k = out.size() experts among logits.size() (the router's output,
// its bias added): by probability (kSoftmax) or logit (kSoftmaxWeight), the
// higher first, a tie going to the lower expert index (llama.cpp leaves ties'
// order to its sort; a fixed rule keeps every node's choice the same).
// logits is overwritten (with the probabilities).
void route_token(const Architecture& family, std::span<float> logits, std::span<ExpertChoice> out);

}  // namespace tessera
