#include "model/moe_router.h"

#include "ops/softmax.h"
#include "util/error.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tessera {

void route_token(const Architecture& family, std::span<float> logits, std::span<ExpertChoice> out) {
    const auto n = static_cast<int64_t>(logits.size());
    const auto k = static_cast<int64_t>(out.size());
    if (k < 1 || k > n) throw make_error("internal: {} experts chosen of {}", k, n);
    // kSoftmax ranks probabilities, kSoftmaxWeight the logits themselves.
    if (family.gating == ExpertGating::kSoftmax) softmax(logits.data(), n);
    // The top k by (probability descending, index ascending). A NaN logit
    // (a broken model) must not break the ordering: it counts as lowest.
    thread_local std::vector<int32_t> order;
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const auto better = [&](int32_t a, int32_t b) {
        const float pa = logits[static_cast<size_t>(a)], pb = logits[static_cast<size_t>(b)];
        const bool na = pa != pa, nb = pb != pb;
        if (na != nb) return nb;
        if (!na && pa != pb) return pa > pb;
        return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
        out[static_cast<size_t>(i)] = {order[static_cast<size_t>(i)], logits[static_cast<size_t>(order[static_cast<size_t>(i)])]};
        sum += out[static_cast<size_t>(i)].weight;
    }
    if (family.gating == ExpertGating::kSoftmaxWeight) {
        // A softmax over the chosen k logits, in choice order.
        thread_local std::vector<float> chosen;
        chosen.resize(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i) chosen[static_cast<size_t>(i)] = out[static_cast<size_t>(i)].weight;
        softmax(chosen.data(), k);
        sum = 0.0f;
        for (int64_t i = 0; i < k; ++i) sum += out[static_cast<size_t>(i)].weight = chosen[static_cast<size_t>(i)];
    }
    if (family.normalize_expert_weights) {
        // llama.cpp clamps the sum to the smallest normal half (no division by 0).
        sum = std::max(sum, 6.103515625e-5f);
        for (ExpertChoice& c : out) c.weight /= sum;
    }
}

}  // namespace tessera
