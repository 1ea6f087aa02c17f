// How far an approximate run's next-token distributions are from a
// reference's over the same tokens: the reference decodes greedily after a
// prompt, the other run is fed the same prompt and the reference's tokens
// (teacher forcing), and each position's KL(reference || other) and top-1
// agreement are compared. Used to measure the compressed exchange of
// sequence-parallel prefill against the exact one.
#pragma once

#include "model/decoder.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct ForcedRun {
    std::vector<int32_t> tokens;  // the tokens fed after the prompt (greedy picks of the reference)
    std::vector<float> logits;    // n_positions rows of n_vocab: after the prompt, then after each token
};

// Greedy: `positions` rows of logits, the prompt's last then each pick's.
ForcedRun greedy_run(Decoder& decoder, std::span<const int32_t> prompt, int positions);
// The same positions fed `tokens` (a reference's picks) instead.
ForcedRun forced_run(Decoder& decoder, std::span<const int32_t> prompt, std::span<const int32_t> tokens);

struct LogitAgreement {
    int positions = 0;
    double kl_mean = 0.0, kl_max = 0.0;  // KL(reference || other), nats
    double top1 = 0.0;                   // fraction of positions with the same most likely token
};

LogitAgreement compare_logits(std::span<const float> reference, std::span<const float> other, int n_vocab);

}  // namespace tessera
