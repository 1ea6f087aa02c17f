// Drafts for speculative decoding: a guess of the next tokens that the target
// model then verifies in one traversal (engine/generation.cpp). A drafter is
// deterministic (it proposes, it does not sample), so verification keeps the
// target's output exactly: greedy token for token, sampled in distribution
// (Sampler::verify).
//   NgramDrafter  prompt lookup: the last n tokens found earlier in the
//                 context, and what followed them there (no model needed)
//   ModelDrafter  a small model with the same vocabulary, run on this node
//                 (its own LocalDecoder and KV cache), greedy
#pragma once

#include "model/decoder.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

class Drafter {
public:
    virtual ~Drafter() = default;
    // Up to max_tokens tokens likely to follow `context` (the prompt and every
    // accepted token) into draft (cleared first); none when it has no guess.
    virtual void propose(std::span<const int32_t> context, int max_tokens, std::vector<int32_t>& draft) = 0;
    virtual std::string name() const = 0;
};

class NgramDrafter : public Drafter {
public:
    // Looks up the last n tokens for n = max_ngram down to min_ngram.
    explicit NgramDrafter(int max_ngram = 3, int min_ngram = 1);
    void propose(std::span<const int32_t> context, int max_tokens, std::vector<int32_t>& draft) override;
    std::string name() const override { return "ngram"; }

private:
    int max_ngram_, min_ngram_;
};

class ModelDrafter : public Drafter {
public:
    // The draft model must have the target's vocabulary (same tokens, same
    // ids): refused with an Error naming both files otherwise.
    ModelDrafter(const std::string& path, const LlamaModel& target, int n_ctx, int n_threads);
    void propose(std::span<const int32_t> context, int max_tokens, std::vector<int32_t>& draft) override;
    std::string name() const override { return "model " + path_; }

private:
    std::string path_;
    LlamaModel model_;
    std::unique_ptr<LocalDecoder> decoder_;
    // The tokens whose K/V the draft's cache holds at positions 0.. (its
    // cache is position-indexed: a rejected guess is simply overwritten).
    std::vector<int32_t> cached_;
};

// Throws an Error when the two models' vocabularies differ (size, a token's
// text or type, or the special ids that end generation).
void require_same_vocabulary(const LlamaModel& draft, const LlamaModel& target);

}  // namespace tessera
