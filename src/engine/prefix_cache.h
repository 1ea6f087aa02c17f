// What a decoder's KV cache holds, so that a new prompt that begins with the
// same tokens (a conversation's next turn, a client resending its history)
// evaluates only the rest. A chat session and each serve slot keep one.
#pragma once

#include "engine/generation.h"
#include "model/decoder.h"
#include "model/tokenizer.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

class PrefixCache {
public:
    // Generates from `prompt`, reusing the cached tokens it begins with (the
    // cache is position-indexed: later positions are simply overwritten), and
    // records what the cache holds afterwards: the prompt and every generated
    // token but the last (sampled, never fed back).
    GenerationResult generate(Decoder& decoder, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                              GenerationParams params, const std::function<void(const std::string&)>& on_text = {});
    // Forgets the cache's contents (the next prompt is evaluated whole).
    void clear() { tokens_.clear(); }
    const std::vector<int32_t>& tokens() const { return tokens_; }

private:
    std::vector<int32_t> tokens_;
};

}  // namespace tessera
