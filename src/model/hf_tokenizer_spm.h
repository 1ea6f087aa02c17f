// A SentencePiece model as Hugging Face's tokenizer.json writes it (a BPE
// with byte_fallback: Llama 2, Mistral, Mixtral, Gemma), turned back into
// what llama.cpp's "llama" tokenizer reads: a score per token, token types,
// and whether a space is put before the text.
//
// tokenizer.json has no scores. transformers builds its merge list from the
// SentencePiece model by ordering every mergeable pair by the score of the
// piece it makes, so the merges' order is the scores' order: a token first
// made by merge r gets score -r, and SentencePiece's merging (the pair whose
// piece scores highest, leftmost first) takes the same steps as the BPE's
// (the pair of lowest rank). Tokens no merge makes (single characters,
// bytes, control and added tokens) are never the result of a merge, and get
// a score below every merge's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct SpmFromHf {
    std::vector<float> scores;     // per id
    bool add_space_prefix = true;  // a "▁" before the text (Llama 2); Gemma puts none
};

// tokens: the text of every id (vocab and added tokens); merges: the BPE's
// pairs in rank order; tokenizer: the whole tokenizer.json, whose normalizer
// and pre-tokenizer must be ones SentencePiece's own behaviour explains
// (Replace " " -> "▁", Prepend "▁", Metaspace, Gemma's no-op Split on " "):
// anything else is refused naming `path`.
SpmFromHf spm_from_hf(const nlohmann::json& tokenizer, const std::vector<std::string>& tokens,
                      const std::vector<std::pair<std::string, std::string>>& merges, const std::string& path);

}  // namespace tessera
