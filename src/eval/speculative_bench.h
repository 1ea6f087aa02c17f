// bench's speculative test: the same greedy generation from a real prompt,
// plain and with a drafter, alternating repetitions on one decoder: tok/s of
// each, the acceptance rate, tokens per traversal and the traversal time.
// (Random tokens, as the tg test uses, would give a draft nothing to guess.)
// With draft_ahead, a third generation drafts ahead (GenerationParams::
// draft_ahead) in the same rotation.
#pragma once

#include "engine/drafter.h"
#include "engine/generation.h"
#include "model/decoder.h"
#include "model/tokenizer.h"

#include <vector>

namespace tessera {

struct SpeculativeBenchResult {
    int tokens = 0;  // generated per repetition
    std::vector<double> plain_tps, speculative_tps;
    int drafted = 0, accepted = 0;  // over all speculative repetitions
    int traversals = 0;             // speculative: decoder evals after the prompt
    int plain_traversals = 0;
    double speculative_seconds = 0.0;  // generation time of all speculative repetitions
    double draft_seconds = 0.0;        // of that, drafting
    double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
    // Generated tokens (after the first, which the prompt's eval gives) per traversal.
    double tokens_per_traversal() const;
    double traversal_ms() const { return traversals > 0 ? speculative_seconds * 1e3 / traversals : 0.0; }
    // Drafting time per traversal: the most that drafting the next block
    // while the target verifies the current one could save.
    double draft_ms() const { return traversals > 0 ? draft_seconds * 1e3 / traversals : 0.0; }

    // Drafting ahead (empty unless asked): tok/s, traversals, those started
    // on a draft made during the one before, and drafting between and
    // during traversals.
    std::vector<double> ahead_tps;
    int ahead_traversals = 0, drafts_ahead = 0;
    double ahead_draft_seconds = 0.0, ahead_hidden_seconds = 0.0;
    double ahead_draft_ms() const { return ahead_traversals > 0 ? ahead_draft_seconds * 1e3 / ahead_traversals : 0.0; }
    double ahead_hidden_ms() const { return ahead_traversals > 0 ? ahead_hidden_seconds * 1e3 / ahead_traversals : 0.0; }
};

// reps repetitions of each, alternating; throws when a speculative answer
// differs from the plain one (greedy must not change).
SpeculativeBenchResult run_speculative_bench(Decoder& decoder, const Tokenizer& tokenizer, Drafter& drafter,
                                             const std::vector<int32_t>& prompt, int n_gen, int reps, int draft_max,
                                             int draft_min, bool draft_ahead = false);

}  // namespace tessera
