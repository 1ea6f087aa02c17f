#include "eval/speculative_bench.h"

#include "util/error.h"

namespace tessera {

double SpeculativeBenchResult::tokens_per_traversal() const {
    const int reps = static_cast<int>(speculative_tps.size());
    return traversals > 0 ? static_cast<double>(reps * (tokens - 1)) / traversals : 0.0;
}

SpeculativeBenchResult run_speculative_bench(Decoder& decoder, const Tokenizer& tokenizer, Drafter& drafter,
                                             const std::vector<int32_t>& prompt, int n_gen, int reps, int draft_max,
                                             int draft_min, bool draft_ahead) {
    GenerationParams params;
    params.n_predict = n_gen;
    params.stop_at_eos = false;
    params.sampler.temperature = 0.0f;
    SpeculativeBenchResult r;
    r.tokens = n_gen;
    std::vector<int32_t> want;
    for (int rep = 0; rep <= reps; ++rep) {  // repetition 0 warms up
        params.drafter = nullptr;
        const GenerationResult plain = generate(decoder, tokenizer, prompt, params);
        params.drafter = &drafter;
        params.draft_max = draft_max;
        params.draft_min = draft_min;
        const GenerationResult spec = generate(decoder, tokenizer, prompt, params);
        if (spec.tokens != plain.tokens) {
            throw make_error("speculative output differs from plain greedy output (repetition {})", rep);
        }
        const auto tps = [&](const GenerationResult& g) {
            return g.generation_seconds > 0 ? static_cast<double>(g.tokens.size() - 1) / g.generation_seconds : 0.0;
        };
        if (draft_ahead) {
            params.draft_ahead = true;
            const GenerationResult ahead = generate(decoder, tokenizer, prompt, params);
            params.draft_ahead = false;
            if (ahead.tokens != plain.tokens) {
                throw make_error("drafting ahead changed the greedy output (repetition {})", rep);
            }
            if (rep > 0) {
                r.ahead_tps.push_back(tps(ahead));
                r.ahead_traversals += ahead.traversals;
                r.drafts_ahead += ahead.drafts_ahead;
                r.ahead_draft_seconds += ahead.draft_seconds;
                r.ahead_hidden_seconds += ahead.draft_ahead_seconds;
            }
        }
        if (rep == 0) continue;
        r.plain_tps.push_back(tps(plain));
        r.speculative_tps.push_back(tps(spec));
        r.drafted += spec.drafted;
        r.accepted += spec.accepted;
        r.traversals += spec.traversals;
        r.plain_traversals += plain.traversals;
        r.speculative_seconds += spec.generation_seconds;
        r.draft_seconds += spec.draft_seconds;
    }
    return r;
}

}  // namespace tessera
