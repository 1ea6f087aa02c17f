// The Decoder a generating command (run, chat) runs on: a single process, or
// any distributed plan under a SupervisedDecoder (which recovers a lost edge
// or node). Also the sampling flags such commands share.
#pragma once

#include "engine/decoder_setup.h"
#include "engine/drafter.h"
#include "engine/generation.h"
#include "engine/sampler.h"
#include "engine/supervised_decoder.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

struct PlanDecoder {
    std::unique_ptr<SupervisedDecoder> supervised;
    DecoderSetup local;
    ParallelOptions options;  // the plan run: --auto's choice written out

    Decoder& decoder() { return supervised ? static_cast<Decoder&>(*supervised) : *local.decoder; }
    const DecoderSetup& setup() const { return supervised ? supervised->setup() : local; }
};

// Recovery messages go to stderr on a line of their own.
PlanDecoder make_plan_decoder(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                              const ParallelOptions& options);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, -s/--seed.
void add_sampler_flags(CLI::App* cmd, SamplerParams& sampler, int64_t& seed);

// chat's and serve's shared flags: --chat-template, -c, -b, -t.
void add_conversation_flags(CLI::App* cmd, std::string& chat_template, int& n_ctx, int& n_batch, int& n_threads);

// Speculative decoding: --draft-model FILE or --draft ngram, --draft-max,
// --draft-min.
struct DraftOptions {
    std::string model;  // a small GGUF with the target's vocabulary, run on this node
    std::string kind;   // "ngram" (prompt lookup), or empty
    int max = 8;
    int min = 1;
    bool ahead = false;  // --draft-ahead (run, chat, bench: serve's slots verify in shared batches)
};
void add_draft_flags(CLI::App* cmd, DraftOptions& draft);
void add_draft_ahead_flag(CLI::App* cmd, DraftOptions& draft);
// The drafter the flags ask for (null for none); a draft model gets its own
// single-node decoder with n_ctx positions and n_threads threads. Sets the
// draft bounds in params.
std::unique_ptr<Drafter> make_drafter(const DraftOptions& draft, const LlamaModel& target, int n_ctx, int n_threads,
                                      GenerationParams& params);

// The sampler's seed: the given one, or a random one when it is negative.
uint64_t seed_of(int64_t seed);

}  // namespace tessera
