#include "engine/prefix_cache.h"

namespace tessera {

GenerationResult PrefixCache::generate(Decoder& decoder, const Tokenizer& tokenizer,
                                       const std::vector<int32_t>& prompt, GenerationParams params,
                                       const std::function<void(const std::string&)>& on_text) {
    size_t common = 0;
    while (common < tokens_.size() && common < prompt.size() && tokens_[common] == prompt[common]) ++common;
    params.n_past = static_cast<int>(common);
    // Until generate returns, the cache holds an unknown mix: a failure
    // leaves it forgotten rather than wrongly trusted.
    tokens_.clear();
    GenerationResult result = tessera::generate(decoder, tokenizer, prompt, params, on_text);
    tokens_ = prompt;
    if (!result.tokens.empty()) tokens_.insert(tokens_.end(), result.tokens.begin(), result.tokens.end() - 1);
    return result;
}

}  // namespace tessera
